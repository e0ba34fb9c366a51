package build

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/rlimit"
)

// runStep runs a RUN instruction in a container on the stage's rootfs and
// records what it changed as a layer.
func (j *job) runStep(ctx context.Context, st *imageState, sc *stageContext, c *instructions.RunCommand, key string, env argEnv) error {
	args, createdBy, err := runArgs(st, c)
	if err != nil {
		return err
	}
	network := j.opts.Network
	switch instructions.GetNetwork(c) {
	case instructions.NetworkDefault:
	case instructions.NetworkNone:
		network = core.BuildNetworkPrivate
	case instructions.NetworkHost:
		network = core.BuildNetworkHost
	default:
		return fmt.Errorf("RUN --network=%s is not supported", instructions.GetNetwork(c))
	}
	mounts := runMountsOf(c)
	// Bind mounts of the context make the step depend on their content.
	var extra []string
	for _, m := range mounts {
		if m.Type == instructions.MountTypeBind && m.From == "" {
			sum, err := j.sourceDigest(j.contextSource(), []string{m.Source})
			if err != nil {
				return err
			}
			extra = append(extra, "bind "+m.Source+" "+sum)
		}
		if m.Type == instructions.MountTypeBind && m.From != "" {
			src, err := j.fromSource(ctx, m.From)
			if err != nil {
				return err
			}
			src.release()
			extra = append(extra, "bind from "+src.id)
		}
	}
	key = chainKey(key, extra...)
	return j.finishStep(ctx, st, sc, key, func() (io.Reader, func(), error) {
		return j.changes(st.topLayer, func(rootfs string) error {
			return j.execRun(ctx, rootfs, st, sc, env, args, mounts, network)
		})
	}, createdBy, false)
}

// proxyVariables are passed to RUN steps with httpproxy, as Buildah does.
var proxyVariables = []string{
	"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ftp_proxy", "FTP_PROXY", "no_proxy", "NO_PROXY",
}

// runArgs is the command line of a RUN and its history text.
func runArgs(st *imageState, c *instructions.RunCommand) ([]string, string, error) {
	if len(c.Files) > 0 {
		line := strings.TrimSpace(strings.Join(c.CmdLine, " "))
		if len(c.Files) != 1 || !c.PrependShell || !strings.HasPrefix(line, "<<") || strings.ContainsAny(line[2:], " \t|;&><") {
			return nil, "", errors.New("only a RUN whose whole command is one heredoc is supported")
		}
		sh := shellOf(st)
		script := c.Files[0].Data
		return append(append([]string(nil), sh...), script), strings.Join(sh, " ") + " " + script, nil
	}
	if c.PrependShell {
		sh := shellOf(st)
		line := strings.Join(c.CmdLine, " ")
		return append(append([]string(nil), sh...), line), strings.Join(sh, " ") + " " + line, nil
	}
	if len(c.CmdLine) == 0 {
		return nil, "", errors.New("RUN needs a command")
	}
	encoded, _ := json.Marshal(c.CmdLine)
	return append([]string(nil), c.CmdLine...), string(encoded), nil
}

func shellOf(st *imageState) []string {
	if len(st.config.Shell) > 0 {
		return st.config.Shell
	}
	return defaultShell
}

// execRun runs args in a container whose root is rootfs (a mounted working
// layer) and fails with the exit status when it is not zero.
func (j *job) execRun(ctx context.Context, rootfs string, st *imageState, sc *stageContext, env argEnv, args []string, mounts []*instructions.Mount, network core.BuildNetwork) error {
	idBytes := make([]byte, 16)
	if _, err := rand.Read(idBytes); err != nil {
		return err
	}
	id := runPrefix + hex.EncodeToString(idBytes)
	bundle, err := os.MkdirTemp(j.b.bundleDir(), tmpPrefix+"run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bundle)

	spec := &core.ContainerSpec{
		Command: args,
		Env:     map[string]string{},
		WorkDir: st.config.WorkingDir,
		User:    st.config.User,
		HostAdd: j.opts.ExtraHosts,
		CapAdd:  j.opts.CapAdd, CapDrop: j.opts.CapDrop,
		SeccompProfilePath: j.opts.SeccompProfilePath,
		DNSServers:         j.opts.DNSServers, DNSSearch: j.opts.DNSSearch, DNSOptions: j.opts.DNSOptions,
	}
	if j.opts.HTTPProxy {
		for _, name := range proxyVariables {
			if v, ok := os.LookupEnv(name); ok {
				spec.Env[name] = v
			}
		}
	}
	// ARGs are in the environment of RUN, under the stage's ENV.
	for k, v := range sc.args {
		spec.Env[k] = v
	}
	for _, kv := range st.config.Env {
		k, v, _ := strings.Cut(kv, "=")
		spec.Env[k] = v
	}
	if network == core.BuildNetworkHost {
		spec.NetNS = core.Namespace{NSMode: core.NetNSHost}
	} else {
		spec.NetNS = core.Namespace{NSMode: core.NetNSPrivate}
	}
	if j.opts.ShmSize > 0 {
		shm := j.opts.ShmSize
		spec.ShmSize = &shm
	}
	if spec.Rlimits, err = parseUlimits(j.opts.Ulimits); err != nil {
		return err
	}
	if j.opts.Memory > 0 {
		mem := j.opts.Memory
		spec.Resources = &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &mem}}
	}
	spec.CPUPeriod = j.opts.CPUPeriod
	spec.CPUQuota = j.opts.CPUQuota
	for _, d := range j.opts.Devices {
		spec.Devices = append(spec.Devices, specs.LinuxDevice{Path: d})
	}

	release, err := j.runMounts(ctx, spec, bundle, mounts)
	defer release()
	if err != nil {
		return err
	}

	hostname := id[len(id)-12:]
	hosts, err := oci.HostsFile(spec, hostname, "", "")
	if err != nil {
		return err
	}
	files := map[string]string{"hosts": hosts, "resolv.conf": oci.ResolvConf(spec, j.b.o.HostResolv), "hostname": hostname + "\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(bundle, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	spec.Hostname = hostname
	res, err := oci.Generate(oci.Input{
		ID: id, Spec: spec,
		Image:          imgspecv1.ImageConfig{},
		Rootfs:         rootfs,
		HostsFile:      filepath.Join(bundle, "hosts"),
		ResolvConfFile: filepath.Join(bundle, "resolv.conf"),
		HostnameFile:   filepath.Join(bundle, "hostname"),
		CgroupsPath:    path.Join(j.b.o.CgroupParent, id),
		Host:           j.b.o.Host,
		SeccompProfile: j.opts.SeccompProfile,
		// RUN steps are confined like containers: the default profile,
		// which lets package managers and compilers work (files, network)
		// but not mount or write kernel tunables.
		ApparmorProfile: j.b.o.AppArmorProfile,
	})
	if err != nil {
		return err
	}
	if cdiNames := core.CDIDevices(spec.Devices); len(cdiNames) > 0 {
		if err := j.b.o.CDI.Inject(res.Spec, cdiNames); err != nil {
			return err
		}
	}
	// Mount points runc creates in the rootfs must not end up in the layer.
	created := missingMountpoints(rootfs, res.Spec.Mounts)
	defer removeMountpoints(created)
	data, err := json.Marshal(res.Spec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return err
	}
	out := j.out
	code, err := j.b.o.Runtime.RunAttached(ctx, id, bundle, out, out)
	if err != nil {
		return fmt.Errorf("while running runtime: %w", err)
	}
	if code != 0 {
		return &RunError{ExitCode: code}
	}
	return nil
}

// RunError is a RUN step whose command exited with a non-zero status.
type RunError struct {
	ExitCode int
}

// Error reads as Buildah's.
func (e *RunError) Error() string {
	return fmt.Sprintf("while running runtime: exit status %d", e.ExitCode)
}

// runMounts turns RUN --mount flags into the container's mounts. The
// returned function releases what they needed (stage rootfs mounts).
func (j *job) runMounts(ctx context.Context, spec *core.ContainerSpec, bundle string, mounts []*instructions.Mount) (func(), error) {
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	for _, m := range mounts {
		target := m.Target
		switch m.Type {
		case instructions.MountTypeSecret:
			id := m.CacheID
			if id == "" {
				id = m.Source
			}
			if id == "" {
				id = path.Base(target)
			}
			if target == "" {
				target = "/run/secrets/" + id
			}
			if m.Env != nil {
				return release, errors.New("RUN --mount=type=secret,env= is not supported")
			}
			file, ok := j.secrets[id]
			if !ok {
				if m.Required {
					return release, fmt.Errorf("secret %q is required but was not given", id)
				}
				continue
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: absTarget(target, spec.WorkDir), Type: "bind", Source: file, Options: []string{"ro", "nosuid", "nodev", "noexec"}})
		case instructions.MountTypeBind:
			if !m.ReadOnly {
				return release, errors.New("RUN --mount=type=bind,rw is not supported")
			}
			var root string
			if m.From == "" {
				root = j.bc.dir
			} else {
				src, err := j.fromSource(ctx, m.From)
				if err != nil {
					return release, err
				}
				releases = append(releases, src.release)
				root = src.root
			}
			rel := strings.TrimPrefix(path.Clean("/"+m.Source), "/")
			if m.From == "" && rel != "" && j.ex.excluded(rel) {
				return release, fmt.Errorf("bind mount source %q is excluded from the context", m.Source)
			}
			source, err := securejoin.SecureJoin(root, rel)
			if err != nil {
				return release, err
			}
			if m.From == "" {
				if r, err := filepath.Rel(j.bc.dir, source); err == nil && j.ex.excluded(filepath.ToSlash(r)) {
					return release, fmt.Errorf("bind mount source %q is excluded from the context", m.Source)
				}
			}
			if _, err := os.Stat(source); err != nil {
				return release, fmt.Errorf("bind mount source %q: %w", m.Source, errors.Unwrap(err))
			}
			if target == "" {
				return release, errors.New("a bind mount needs a target")
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: absTarget(target, spec.WorkDir), Type: "bind", Source: source, Options: []string{"ro", "rbind"}})
		case instructions.MountTypeCache:
			if m.From != "" {
				return release, errors.New("RUN --mount=type=cache,from= is not supported")
			}
			if target == "" {
				return release, errors.New("a cache mount needs a target")
			}
			cacheID := m.CacheID
			if cacheID == "" {
				cacheID = target
			}
			dir := filepath.Join(j.b.cacheDir(), chainKey("cache", cacheID)[:32])
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
				mode := os.FileMode(0o755)
				if m.Mode != nil {
					mode = os.FileMode(*m.Mode)
				}
				if err := os.Mkdir(dir, mode); err != nil {
					return release, err
				}
				if err := os.Chmod(dir, mode); err != nil {
					return release, err
				}
				uid, gid := 0, 0
				if m.UID != nil {
					uid = int(*m.UID)
				}
				if m.GID != nil {
					gid = int(*m.GID)
				}
				if err := os.Lchown(dir, uid, gid); err != nil {
					return release, err
				}
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: absTarget(target, spec.WorkDir), Type: "bind", Source: dir, Options: []string{"rw", "rbind"}})
		case instructions.MountTypeTmpfs:
			if target == "" {
				return release, errors.New("a tmpfs mount needs a target")
			}
			opts := []string{}
			if m.SizeLimit > 0 {
				opts = append(opts, "size="+strconv.FormatInt(m.SizeLimit, 10))
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: absTarget(target, spec.WorkDir), Type: "tmpfs", Options: opts})
		default:
			return release, fmt.Errorf("RUN --mount=type=%s is not supported", m.Type)
		}
	}
	return release, nil
}

// absTarget resolves a mount target against the working directory.
func absTarget(target, workdir string) string {
	if path.IsAbs(target) {
		return path.Clean(target)
	}
	if workdir == "" {
		workdir = "/"
	}
	return path.Join(workdir, target)
}

// missingMountpoints returns, for each mount destination missing from
// rootfs, the topmost missing path: what runc will create.
func missingMountpoints(rootfs string, mounts []specs.Mount) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range mounts {
		parts := strings.Split(strings.Trim(path.Clean(m.Destination), "/"), "/")
		cur := "/"
		for _, p := range parts {
			cur = path.Join(cur, p)
			full, err := securejoin.SecureJoin(rootfs, cur)
			if err != nil {
				break
			}
			if _, err := os.Lstat(full); errors.Is(err, fs.ErrNotExist) {
				if !seen[full] {
					seen[full] = true
					out = append(out, full)
				}
				break
			}
		}
	}
	return out
}

// removeMountpoints removes the paths runc created for mounts, when they
// hold nothing but empty files and directories (what a RUN wrote there
// stays).
func removeMountpoints(paths []string) {
	for _, p := range paths {
		if onlyEmpty(p) {
			_ = os.RemoveAll(p)
		}
	}
}

func onlyEmpty(p string) bool {
	empty := true
	err := filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
			empty = false
			return filepath.SkipAll
		}
		return nil
	})
	return err == nil && empty
}

// parseUlimits reads "name=soft[:hard]" limits ("-1" is unlimited).
func parseUlimits(ulimits []string) ([]rlimit.Rlimit, error) {
	var out []rlimit.Rlimit
	for _, u := range ulimits {
		name, val, ok := strings.Cut(u, "=")
		if !ok || name == "" {
			return nil, core.InvalidArgument("ulimits", fmt.Errorf("%q is not name=soft[:hard]", u))
		}
		softS, hardS, hasHard := strings.Cut(val, ":")
		if !hasHard {
			hardS = softS
		}
		parse := func(s string) (uint64, error) {
			if s == "-1" || s == "unlimited" {
				return ^uint64(0), nil
			}
			return strconv.ParseUint(s, 10, 64)
		}
		soft, err := parse(softS)
		if err != nil {
			return nil, core.InvalidArgument("ulimits", fmt.Errorf("%q: %w", u, err))
		}
		hard, err := parse(hardS)
		if err != nil {
			return nil, core.InvalidArgument("ulimits", fmt.Errorf("%q: %w", u, err))
		}
		if _, known := oci.RlimitName(name); !known {
			return nil, core.InvalidArgument("ulimits", fmt.Errorf("unknown limit %q", name))
		}
		out = append(out, rlimit.Rlimit{Type: name, Soft: soft, Hard: hard})
	}
	return out, nil
}
