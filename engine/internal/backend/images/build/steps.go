package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/containers/image/v5/manifest"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
)

// stageContext is what a stage tracks beside its image configuration.
type stageContext struct {
	// args are the ARGs declared in the stage, with their values.
	args argEnv
	// cmdSet tells whether the stage set CMD itself (ENTRYPOINT then keeps it).
	cmdSet bool
	// cacheHit stays true while every step so far came from the cache.
	cacheHit bool
	// final is set for the last step of the build's last stage.
	final bool
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
	for _, kv := range st.config.Env {
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
		return j.metadataStep(ctx, st, sc, key, "ARG "+argsText(c))
	case *instructions.RunCommand:
		return j.runStep(ctx, st, sc, c, key, env)
	case *instructions.CopyCommand:
		return j.copyStep(ctx, st, sc, c, key)
	case *instructions.AddCommand:
		return j.addStep(ctx, st, sc, c, key)
	}
	if err := j.applyMetadata(&st.config, sc, cmd, expand); err != nil {
		return err
	}
	return j.metadataStep(ctx, st, sc, key, code)
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
func (j *job) applyMetadata(cfg *imagestore.RuntimeConfig, sc *stageContext, cmd instructions.Command, expand func(string) (string, error)) error {
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
		return errors.New("MAINTAINER is deprecated and not supported; use LABEL maintainer=NAME")
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
		j.warnOCI("SHELL")
	case *instructions.HealthCheckCommand:
		cfg.Healthcheck = nil
		if h := c.Health; h != nil {
			cfg.Healthcheck = &manifest.Schema2HealthConfig{
				Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod,
				StartInterval: h.StartInterval, Retries: h.Retries,
			}
		}
		j.warnOCI("HEALTHCHECK")
	case *instructions.OnbuildCommand:
		cfg.OnBuild = append(cfg.OnBuild, c.Expression)
		j.warnOCI("ONBUILD")
	default:
		return fmt.Errorf("instruction %s is not supported", strings.ToUpper(cmd.Name()))
	}
	return nil
}

// warnOCI says, as Buildah does, that an instruction only the Docker
// format stores is not kept in an OCI image (it still applies to the rest
// of the build).
func (j *job) warnOCI(instruction string) {
	if j.opts.Format == "oci" {
		fmt.Fprintf(j.out, "WARN: %s is not supported for OCI image format, %s will be ignored. Must use `docker` format\n", instruction, strings.ToLower(instruction))
	}
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

// metadataStep finishes a step that adds no layer.
func (j *job) metadataStep(ctx context.Context, st *imageState, sc *stageContext, key, createdBy string) error {
	return j.finishStep(ctx, st, sc, key, nil, "/bin/sh -c #(nop) "+createdBy, true)
}

// layerChange produces a step's layer: an uncompressed tar of its changes
// and a function that frees it.
type layerChange func() (io.Reader, func(), error)

// finishStep completes a step: on a cache hit the cached image becomes the
// stage's image; otherwise change (nil for a step without a layer) runs and
// an image is committed with a history entry. The stage's final step also
// gets the build's labels and annotations.
func (j *job) finishStep(ctx context.Context, st *imageState, sc *stageContext, key string, change layerChange, createdBy string, empty bool) error {
	var annotations map[string]string
	if sc.final {
		labels := j.finalLabels()
		annotations = j.finalAnnotations()
		key = chainKey(key, "final", sortedPairs(labels), sortedPairs(annotations))
		if len(labels) > 0 && st.config.Labels == nil {
			st.config.Labels = map[string]string{}
		}
		for k, v := range labels {
			st.config.Labels[k] = v
		}
	}
	if sc.cacheHit {
		if img, ok := j.cached(key); ok {
			st.id, st.topLayer, st.cacheKey = img.ID, img.TopLayer, key
			fmt.Fprintf(j.out, "--> Using cache %s\n", img.ID)
			fmt.Fprintf(j.out, "--> %.11s\n", img.ID)
			return nil
		}
		sc.cacheHit = false
	}
	var layer io.Reader
	if change != nil {
		if err := j.materialize(ctx); err != nil {
			return err
		}
		start := time.Now()
		r, release, err := change()
		j.ph.since(phaseRun, start)
		if err != nil {
			return err
		}
		defer release()
		layer = r
	}
	meta, err := json.Marshal(imageMetadata{CacheKey: key})
	if err != nil {
		return err
	}
	if j.cache == nil {
		meta = nil
	}
	config := st.clone().config
	defer j.ph.since(phaseCommit, time.Now())
	id, err := j.b.o.Transfer.Commit(ctx, imagestore.CommitOptions{
		Parent:      st.id,
		Layer:       layer,
		Edit:        func(c *imagestore.RuntimeConfig) error { *c = config; return nil },
		CreatedBy:   createdBy,
		Format:      j.opts.Format,
		Annotations: annotations,
		Metadata:    string(meta),
	})
	if err != nil {
		return err
	}
	img, err := j.b.o.Store.Storage().Image(id)
	if err != nil {
		return err
	}
	st.id, st.topLayer, st.cacheKey = id, img.TopLayer, key
	if j.cache != nil {
		j.cache[key] = id
	}
	if !j.opts.Layers {
		j.temporary = append(j.temporary, id)
		return nil
	}
	fmt.Fprintf(j.out, "--> %.11s\n", id)
	return nil
}
