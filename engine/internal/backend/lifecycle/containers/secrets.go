package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.SecretUsers = (*Manager)(nil)

// SecretSource gives the container backend the secrets containers consume.
type SecretSource interface {
	// Data returns a secret (by name, ID or unique ID prefix) and its data.
	Data(ctx context.Context, nameOrID string) (*core.Secret, []byte, error)
}

// secretsDir is where a container's secret files live, under its static
// directory (0700, the engine's root only).
const secretsDir = "secrets"

// defaultSecretMode is the mode of a secret file whose request sets none
// (what the podman client sends by default: 0444).
const defaultSecretMode = 0o444

// resolveSecrets checks that every secret the spec names exists and
// rewrites the spec to refer to secrets by ID (a name may be reused after
// the secret is removed); file targets become absolute. The container's ID
// is recorded as a user of each secret until the caller's release, so a
// secret cannot be removed while the container is being created.
func (m *Manager) resolveSecrets(ctx context.Context, id string, spec *core.ContainerSpec) (release func(), err error) {
	var reserved []string
	release = func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, sid := range reserved {
			m.creatingSecrets[sid] = slices.DeleteFunc(m.creatingSecrets[sid], func(c string) bool { return c == id })
			if len(m.creatingSecrets[sid]) == 0 {
				delete(m.creatingSecrets, sid)
			}
		}
	}
	resolve := func(field, name string) (string, error) {
		if m.secrets == nil {
			return "", core.InvalidArgument(field, errors.New("this engine has no secret backend"))
		}
		sec, _, err := m.secrets.Data(ctx, name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		m.mu.Lock()
		m.creatingSecrets[sec.ID] = append(m.creatingSecrets[sec.ID], id)
		m.mu.Unlock()
		reserved = append(reserved, sec.ID)
		// Removed meanwhile? It was looked up before the reservation.
		again, _, err := m.secrets.Data(ctx, sec.ID)
		if err != nil || again.ID != sec.ID {
			return "", fmt.Errorf("%s: no secret with name or id %q: %w", field, name, core.ErrNoSuchSecret)
		}
		return sec.ID, nil
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	mounts := slices.Clone(spec.Secrets)
	for i, s := range mounts {
		field := fmt.Sprintf("secrets[%d]", i)
		target := s.Target
		switch {
		case target == "":
			target = filepath.Join("/run/secrets", s.Source)
		case !filepath.IsAbs(target):
			target = filepath.Join("/run/secrets", target)
		}
		target = filepath.Clean(target)
		if target == "/" || target == "/run/secrets" {
			return release, core.InvalidArgument(field+".Target", fmt.Errorf("%q is not a file path", s.Target))
		}
		if s.Mode == 0 {
			s.Mode = defaultSecretMode
		}
		if s.Mode > 0o7777 {
			return release, core.InvalidArgument(field+".Mode", fmt.Errorf("%o is not a file mode", s.Mode))
		}
		sid, err := resolve(field+".Source", s.Source)
		if err != nil {
			return release, err
		}
		s.Source, s.Target = sid, target
		mounts[i] = s
	}
	spec.Secrets = mounts
	if len(spec.SecretEnv) > 0 {
		env := make(map[string]string, len(spec.SecretEnv))
		for _, name := range sortedKeys(spec.SecretEnv) {
			if name == "" || strings.ContainsAny(name, "=\x00") {
				return release, core.InvalidArgument("secret_env", fmt.Errorf("invalid variable name %q", name))
			}
			sid, err := resolve("secret_env."+name, spec.SecretEnv[name])
			if err != nil {
				return release, err
			}
			env[name] = sid
		}
		spec.SecretEnv = env
	}
	return release, nil
}

// secretMounts writes the container's secret files into its static
// directory (owner and mode as requested) and returns their read-only bind
// mounts; secretEnv returns the secret environment variables. Both read the
// secrets' current data, so a replaced secret reaches the next start.
func (m *Manager) secretMounts(ctx context.Context, rec *record) ([]specs.Mount, error) {
	if len(rec.Spec.Secrets) == 0 {
		return nil, nil
	}
	if m.secrets == nil {
		return nil, errors.New("this engine has no secret backend")
	}
	dir := filepath.Join(rec.StaticDir, secretsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	out := make([]specs.Mount, 0, len(rec.Spec.Secrets))
	for i, s := range rec.Spec.Secrets {
		_, data, err := m.secrets.Data(ctx, s.Source)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		file := filepath.Join(dir, strconv.Itoa(i))
		err = writeOwnedFile(file, data, os.FileMode(s.Mode), int(s.UID), int(s.GID))
		clear(data)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: writing the secret file: %w", i, err)
		}
		out = append(out, specs.Mount{Destination: s.Target, Type: "bind", Source: file, Options: []string{"bind", "rprivate", "ro", "nosuid", "nodev", "noexec"}})
	}
	return out, nil
}

// secretEnv returns "NAME=data" for each of the spec's secret_env entries.
func (m *Manager) secretEnv(ctx context.Context, spec *core.ContainerSpec) ([]string, error) {
	if len(spec.SecretEnv) == 0 {
		return nil, nil
	}
	if m.secrets == nil {
		return nil, errors.New("this engine has no secret backend")
	}
	out := make([]string, 0, len(spec.SecretEnv))
	for _, name := range sortedKeys(spec.SecretEnv) {
		_, data, err := m.secrets.Data(ctx, spec.SecretEnv[name])
		if err != nil {
			return nil, fmt.Errorf("secret_env.%s: %w", name, err)
		}
		out = append(out, name+"="+string(data))
		clear(data)
	}
	return out, nil
}

// writeOwnedFile replaces file with data, with the given mode and owner.
func writeOwnedFile(file string, data []byte, mode os.FileMode, uid, gid int) error {
	tmp := file + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chown(tmp, uid, gid)
	}
	if werr == nil {
		werr = os.Chmod(tmp, mode)
	}
	if werr == nil {
		werr = os.Rename(tmp, file)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}

// ContainersUsingSecret returns the IDs of the containers that use a secret
// (as a file or an environment variable), those being created included.
func (m *Manager) ContainersUsingSecret(_ context.Context, secretID string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ids := slices.Clone(m.creatingSecrets[secretID])
	for id, e := range m.byID {
		if usesSecret(&e.rec.Spec, secretID) && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func usesSecret(spec *core.ContainerSpec, secretID string) bool {
	for _, s := range spec.Secrets {
		if s.Source == secretID {
			return true
		}
	}
	for _, sid := range spec.SecretEnv {
		if sid == secretID {
			return true
		}
	}
	return false
}
