package imagestore

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/containers/image/v5/copy"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/tarball"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/backend/platform/words"
	"github.com/berth-project/berth/engine/internal/core"
)

// Import creates a one-layer image from a rootfs tarball read from r.
func (t *Transfer) Import(ctx context.Context, r io.Reader, opts core.ImportOptions) (_ string, err error) {
	defer t.observe("import", time.Now(), &err)
	config, err := importConfig(opts)
	if err != nil {
		return "", err
	}
	path, err := t.receiveBody(ctx, r, "import-*.tar", "tarball")
	if err != nil {
		return "", err
	}
	defer os.Remove(path)
	return t.importFile(ctx, path, config, opts.Reference)
}

// ImportURL downloads a rootfs tarball and imports it.
func (t *Transfer) ImportURL(ctx context.Context, rawURL string, opts core.ImportOptions) (_ string, err error) {
	defer t.observe("import", time.Now(), &err)
	config, err := importConfig(opts)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", core.InvalidArgument("url", fmt.Errorf("%q is not an http(s) URL", rawURL))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", core.InvalidArgument("url", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", core.InvalidArgument("url", fmt.Errorf("downloading %s: %w", u.Redacted(), err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", core.InvalidArgument("url", fmt.Errorf("downloading %s: %s", u.Redacted(), resp.Status))
	}
	path, err := t.spool(ctx, resp.Body, "import-*.tar", "tarball", "downloading "+u.Redacted())
	if err != nil {
		return "", err
	}
	defer os.Remove(path)
	return t.importFile(ctx, path, config, opts.Reference)
}

// importFile stores the tarball at path as a one-layer image with config and
// names it reference (under localhost/ when short).
func (t *Transfer) importFile(ctx context.Context, path string, config imgspecv1.Image, ref string) (id string, err error) {
	var name string
	if ref != "" {
		named, err := localName(ref)
		if err != nil {
			return "", core.InvalidArgument("reference", fmt.Errorf("%q: %w", ref, err))
		}
		name = named.String()
	}
	if err := validateTarball(ctx, path, t.budget("tarball")); err != nil {
		return "", err
	}
	src, err := tarball.NewReference([]string{path}, nil)
	if err != nil {
		return "", core.InvalidArgument("tarball", err)
	}
	updater, ok := src.(tarball.ConfigUpdater)
	if !ok {
		return "", errors.New("tarball reference cannot take a configuration")
	}
	if err := updater.ConfigUpdate(config, nil); err != nil {
		return "", err
	}
	id, err = configID(ctx, t.systemContext(), src)
	if err != nil {
		return "", core.InvalidArgument("tarball", err)
	}
	dest, err := istorage.Transport.NewStoreReference(t.store.Storage(), nil, id)
	if err != nil {
		return "", err
	}
	end := t.begin()
	defer func() { end(err != nil) }()
	if _, err = t.copyImage(ctx, dest, src, &copy.Options{}); err != nil {
		return "", classifyLoadError(ctx, err)
	}
	if name != "" {
		if err = t.store.Storage().AddNames(id, []string{name}); err != nil {
			return "", fmt.Errorf("naming imported image: %w", err)
		}
	}
	t.store.emit(ctx, "import", id, name)
	return "sha256:" + id, nil
}

// validateTarball reads the whole (possibly compressed) tarball so that a
// truncated or non-tar upload is refused before anything is stored, and
// charges what it expands to against budget.
func validateTarball(ctx context.Context, path string, budget *sizelimit.Budget) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rc, err := budget.Decompress(ctx, f)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// The layer is the whole stream, padding after the end
			// of the archive included: it counts too.
			_, err = io.Copy(io.Discard, rc)
			if err == nil {
				return nil
			}
		}
		if err == nil {
			_, err = io.Copy(io.Discard, tr)
		}
		if err != nil {
			if errors.Is(err, core.ErrTooLarge) || ctx.Err() != nil {
				return err
			}
			return core.InvalidArgument("tarball", fmt.Errorf("not a valid tar archive: %w", err))
		}
	}
}

// importConfig builds the new image's configuration from the options.
func importConfig(opts core.ImportOptions) (imgspecv1.Image, error) {
	cfg, err := ApplyChanges(imgspecv1.ImageConfig{}, opts.Changes)
	if err != nil {
		return imgspecv1.Image{}, err
	}
	now := time.Now().UTC()
	image := imgspecv1.Image{
		Created: &now,
		Config:  cfg,
		History: []imgspecv1.History{{Created: &now, Comment: opts.Message}},
	}
	image.OS = opts.OS
	if image.OS == "" {
		image.OS = runtime.GOOS
	}
	image.Architecture = opts.Arch
	if image.Architecture == "" {
		image.Architecture = runtime.GOARCH
	}
	image.Variant = opts.Variant
	return image, nil
}

// ApplyChanges applies Dockerfile-style instructions (CMD, ENTRYPOINT, ENV,
// WORKDIR, LABEL, EXPOSE, USER, VOLUME, STOPSIGNAL) to cfg, as `podman
// import --change` does. Each change is "INSTRUCTION args" or
// "INSTRUCTION=args"; a malformed one is an ErrInvalidArgument about
// "changes".
func ApplyChanges(cfg imgspecv1.ImageConfig, changes []string) (imgspecv1.ImageConfig, error) {
	rc := RuntimeConfig{ImageConfig: cfg}
	err := rc.apply(changes, false)
	return rc.ImageConfig, err
}

// apply applies changes to c; ONBUILD is accepted only with onBuild (it
// exists in the Docker configuration format only).
func (c *RuntimeConfig) apply(changes []string, onBuild bool) error {
	for _, change := range changes {
		change = strings.TrimSpace(change)
		if change == "" {
			continue
		}
		instr, args, err := splitChange(change)
		if err != nil {
			return core.InvalidArgument("changes", err)
		}
		if instr == "ONBUILD" {
			if !onBuild {
				return core.InvalidArgument("changes", fmt.Errorf("%q: ONBUILD is only kept by the docker image format", change))
			}
			c.OnBuild = append(c.OnBuild, args)
			continue
		}
		if err := applyChange(&c.ImageConfig, instr, args); err != nil {
			return core.InvalidArgument("changes", fmt.Errorf("%q: %w", change, err))
		}
	}
	return nil
}

func splitChange(change string) (string, string, error) {
	i := strings.IndexAny(change, " \t=")
	if i <= 0 {
		return "", "", fmt.Errorf("%q: expected INSTRUCTION arguments", change)
	}
	instr := strings.ToUpper(change[:i])
	args := strings.TrimSpace(change[i+1:])
	if args == "" {
		return "", "", fmt.Errorf("%q: %s needs an argument", change, instr)
	}
	return instr, args, nil
}

func applyChange(cfg *imgspecv1.ImageConfig, instr, args string) error {
	switch instr {
	case "CMD":
		cfg.Cmd = commandForm(args)
	case "ENTRYPOINT":
		cfg.Entrypoint = commandForm(args)
	case "ENV":
		pairs, err := keyValues(args)
		if err != nil {
			return err
		}
		for _, kv := range pairs {
			cfg.Env = setEnv(cfg.Env, kv[0], kv[1])
		}
	case "LABEL":
		pairs, err := keyValues(args)
		if err != nil {
			return err
		}
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		for _, kv := range pairs {
			cfg.Labels[kv[0]] = kv[1]
		}
	case "WORKDIR":
		cfg.WorkingDir = args
	case "USER":
		cfg.User = args
	case "STOPSIGNAL":
		cfg.StopSignal = args
	case "EXPOSE":
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = map[string]struct{}{}
		}
		for _, port := range strings.Fields(args) {
			if !strings.Contains(port, "/") {
				port += "/tcp"
			}
			num, proto, _ := strings.Cut(port, "/")
			if !validPort(num) || (proto != "tcp" && proto != "udp" && proto != "sctp") {
				return fmt.Errorf("invalid port %q", port)
			}
			cfg.ExposedPorts[port] = struct{}{}
		}
	case "VOLUME":
		var vols []string
		if strings.HasPrefix(args, "[") {
			if err := json.Unmarshal([]byte(args), &vols); err != nil {
				return fmt.Errorf("invalid JSON array: %w", err)
			}
		} else {
			vols = strings.Fields(args)
		}
		if cfg.Volumes == nil {
			cfg.Volumes = map[string]struct{}{}
		}
		for _, v := range vols {
			if !strings.HasPrefix(v, "/") {
				return fmt.Errorf("volume %q is not an absolute path", v)
			}
			cfg.Volumes[v] = struct{}{}
		}
	default:
		return fmt.Errorf("unsupported instruction %s (CMD, ENTRYPOINT, ENV, EXPOSE, LABEL, STOPSIGNAL, USER, VOLUME, WORKDIR)", instr)
	}
	return nil
}

// commandForm reads the JSON (exec) form or wraps the shell form in /bin/sh -c.
func commandForm(args string) []string {
	if strings.HasPrefix(args, "[") {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err == nil {
			return argv
		}
	}
	return []string{"/bin/sh", "-c", args}
}

// keyValues parses "k=v k2=\"v 2\"" and the legacy one-pair "k v" form.
func keyValues(args string) ([][2]string, error) {
	words, err := splitWords(args)
	if err != nil {
		return nil, err
	}
	if len(words) > 0 && !strings.Contains(words[0], "=") {
		key, value, _ := strings.Cut(args, " ")
		value = strings.TrimSpace(value)
		return [][2]string{{key, unquote(value)}}, nil
	}
	var out [][2]string
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", w)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// splitWords splits on spaces outside double or single quotes and removes
// the quotes; a backslash is an ordinary character.
func splitWords(s string) ([]string, error) {
	return words.Split(s, words.Rules{Separators: " \t"})
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

func setEnv(env []string, key, value string) []string {
	for i, e := range env {
		if k, _, _ := strings.Cut(e, "="); k == key {
			env[i] = key + "=" + value
			return env
		}
	}
	return append(env, key+"="+value)
}

func validPort(s string) bool {
	lo, hi, isRange := strings.Cut(s, "-")
	check := func(p string) bool {
		if p == "" || len(p) > 5 {
			return false
		}
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				return false
			}
			n = n*10 + int(c-'0')
		}
		return n >= 1 && n <= 65535
	}
	if isRange {
		return check(lo) && check(hi)
	}
	return check(lo)
}
