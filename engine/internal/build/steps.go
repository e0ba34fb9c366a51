package build

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// stageContext is what a stage tracks beside its image configuration.
type stageContext struct {
	// args are the ARGs declared in the stage, with their values.
	args argEnv
	// cmdSet tells whether the stage set CMD itself (ENTRYPOINT then keeps it).
	cmdSet bool
	// cacheHit stays true while every step so far came from the cache.
	cacheHit bool
}

// defaultShell runs the shell form of RUN, CMD and ENTRYPOINT.
var defaultShell = []string{"/bin/sh", "-c"}

// commandText is an instruction as written (flags included).
func commandText(cmd instructions.Command) string {
	if s, ok := cmd.(fmt.Stringer); ok {
		return s.String()
	}
	return cmd.Name()
}

// expansionEnv is what ${VAR} in an instruction sees: the stage's ARGs,
// overridden by its environment.
func expansionEnv(st *imageState, sc *stageContext) argEnv {
	env := argEnv{}
	for k, v := range sc.args {
		env[k] = v
	}
	for _, kv := range st.doc.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// step runs one instruction on st.
func (j *job) step(ctx context.Context, st *imageState, sc *stageContext, cmd instructions.Command, lex *shell.Lex) error {
	env := expansionEnv(st, sc)
	expand := func(word string) (string, error) {
		v, _, err := lex.ProcessWord(word, env)
		return v, err
	}
	if e, ok := cmd.(instructions.SupportsSingleWordExpansion); ok {
		if err := e.Expand(expand); err != nil {
			return err
		}
	}
	code := commandText(cmd)
	// What the step depends on beyond its text: the variables it sees.
	key := chainKey(st.cacheKey, code, sortedPairs(env))
	switch c := cmd.(type) {
	case *instructions.ArgCommand:
		for _, kv := range c.Args {
			v, given := j.opts.BuildArgs[kv.Key]
			if !given {
				if gv, ok := j.global[kv.Key]; ok && kv.Value == nil {
					v, given = gv, true
				} else if kv.Value != nil {
					v, given = *kv.Value, true
				}
			}
			if given {
				sc.args[kv.Key] = v
			} else {
				sc.args[kv.Key] = ""
			}
		}
		// ARG values reach the image only through what later steps do
		// with them; the step itself keeps a history entry as Buildah does.
		return j.metadataStep(st, sc, key, "ARG "+argsText(c))
	case *instructions.RunCommand:
		return j.runStep(ctx, st, sc, c, key, env)
	case *instructions.CopyCommand:
		return j.copyStep(ctx, st, sc, c, key)
	case *instructions.AddCommand:
		return j.addStep(ctx, st, sc, c, key)
	}
	if err := applyMetadata(&st.doc.Config, sc, cmd, expand); err != nil {
		return err
	}
	return j.metadataStep(st, sc, key, code)
}

// argsText renders ARG's declarations for the history.
func argsText(c *instructions.ArgCommand) string {
	parts := make([]string, 0, len(c.Args))
	for _, kv := range c.Args {
		if kv.Value != nil {
			parts = append(parts, kv.Key+"="+*kv.Value)
		} else {
			parts = append(parts, kv.Key)
		}
	}
	return strings.Join(parts, " ")
}

// applyMetadata applies an instruction that only changes the configuration.
func applyMetadata(cfg *dockerConfig, sc *stageContext, cmd instructions.Command, expand func(string) (string, error)) error {
	shellCmd := func(line instructions.ShellDependantCmdLine) []string {
		if !line.PrependShell {
			return append([]string(nil), line.CmdLine...)
		}
		sh := cfg.Shell
		if len(sh) == 0 {
			sh = defaultShell
		}
		return append(append([]string(nil), sh...), strings.Join(line.CmdLine, " "))
	}
	switch c := cmd.(type) {
	case *instructions.EnvCommand:
		for _, kv := range c.Env {
			cfg.Env = setEnv(cfg.Env, kv.Key, kv.Value)
		}
	case *instructions.LabelCommand:
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		for _, kv := range c.Labels {
			cfg.Labels[kv.Key] = kv.Value
		}
	case *instructions.MaintainerCommand:
		return errors.New("MAINTAINER is deprecated and not supported; use LABEL maintainer=...")
	case *instructions.WorkdirCommand:
		dir := c.Path
		if !path.IsAbs(dir) {
			base := cfg.WorkingDir
			if base == "" {
				base = "/"
			}
			dir = path.Join(base, dir)
		}
		cfg.WorkingDir = path.Clean(dir)
	case *instructions.UserCommand:
		cfg.User = c.User
	case *instructions.ExposeCommand:
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = map[string]struct{}{}
		}
		for _, p := range c.Ports {
			p, err := expand(p)
			if err != nil {
				return err
			}
			ports, err := exposedPorts(p)
			if err != nil {
				return err
			}
			for _, port := range ports {
				cfg.ExposedPorts[port] = struct{}{}
			}
		}
	case *instructions.VolumeCommand:
		if cfg.Volumes == nil {
			cfg.Volumes = map[string]struct{}{}
		}
		for _, v := range c.Volumes {
			if v == "" {
				return errors.New("VOLUME needs a path")
			}
			cfg.Volumes[v] = struct{}{}
		}
	case *instructions.StopSignalCommand:
		cfg.StopSignal = c.Signal
	case *instructions.CmdCommand:
		cfg.Cmd = shellCmd(c.ShellDependantCmdLine)
		sc.cmdSet = true
	case *instructions.EntrypointCommand:
		cfg.Entrypoint = shellCmd(c.ShellDependantCmdLine)
		if !sc.cmdSet {
			cfg.Cmd = nil
		}
	case *instructions.ShellCommand:
		cfg.Shell = append([]string(nil), c.Shell...)
	case *instructions.HealthCheckCommand:
		cfg.Healthcheck = c.Health
	case *instructions.OnbuildCommand:
		cfg.OnBuild = append(cfg.OnBuild, c.Expression)
	default:
		return fmt.Errorf("instruction %s is not supported", strings.ToUpper(cmd.Name()))
	}
	return nil
}

// exposedPorts reads an EXPOSE argument: "80", "80/udp" or "8000-8002/tcp".
func exposedPorts(spec string) ([]string, error) {
	port, proto, _ := strings.Cut(spec, "/")
	if proto == "" {
		proto = "tcp"
	}
	proto = strings.ToLower(proto)
	if proto != "tcp" && proto != "udp" && proto != "sctp" {
		return nil, fmt.Errorf("EXPOSE %s: protocol must be tcp, udp or sctp", spec)
	}
	lo, hi, isRange := strings.Cut(port, "-")
	var start, end int
	if _, err := fmt.Sscanf(lo, "%d", &start); err != nil || start < 1 || start > 65535 || fmt.Sprint(start) != lo {
		return nil, fmt.Errorf("EXPOSE %s: %q is not a port", spec, lo)
	}
	end = start
	if isRange {
		if _, err := fmt.Sscanf(hi, "%d", &end); err != nil || end < start || end > 65535 || fmt.Sprint(end) != hi {
			return nil, fmt.Errorf("EXPOSE %s: %q is not a port range", spec, port)
		}
	}
	out := make([]string, 0, end-start+1)
	for p := start; p <= end; p++ {
		out = append(out, fmt.Sprintf("%d/%s", p, proto))
	}
	return out, nil
}

// setEnv sets key in a KEY=value list, keeping its position.
func setEnv(env []string, key, value string) []string {
	for i, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			env[i] = key + "=" + value
			return env
		}
	}
	return append(env, key+"="+value)
}

// metadataStep finishes a step that adds no layer: a history entry and,
// with layers, an intermediate image (or the cached one).
func (j *job) metadataStep(st *imageState, sc *stageContext, key, createdBy string) error {
	return j.finishStep(st, sc, key, func() (string, error) { return "", nil }, "/bin/sh -c #(nop) "+createdBy, true)
}

// finishStep completes a step: on a cache hit the cached image replaces
// st; otherwise change runs (returning the new top layer, "" for none), a
// history entry is added and, with layers, an intermediate image committed.
func (j *job) finishStep(st *imageState, sc *stageContext, key string, change func() (string, error), createdBy string, empty bool) error {
	if sc.cacheHit {
		if id, ok := j.cached(key); ok {
			cached, err := j.load(id)
			if err != nil {
				return err
			}
			*st = *cached
			st.cacheKey = key
			fmt.Fprintf(j.out, "--> Using cache %s\n", id)
			fmt.Fprintf(j.out, "--> %.11s\n", id)
			return nil
		}
		sc.cacheHit = false
	}
	layer, err := change()
	if err != nil {
		return err
	}
	t := now()
	if !empty {
		l, err := j.b.o.Store.Storage().Layer(layer)
		if err != nil {
			return err
		}
		st.topLayer = layer
		st.doc.RootFS.DiffIDs = append(st.doc.RootFS.DiffIDs, l.UncompressedDigest)
	}
	st.doc.Created = &t
	st.doc.History = append(st.doc.History, imgspecv1.History{Created: &t, CreatedBy: createdBy, EmptyLayer: empty})
	st.cacheKey = key
	st.id = ""
	if !j.opts.Layers {
		return nil
	}
	if err := j.commitAs(st, nil); err != nil {
		return err
	}
	fmt.Fprintf(j.out, "--> %.11s\n", st.id)
	return nil
}

// sortedKeys lists a set's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
