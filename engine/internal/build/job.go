package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/berth-project/berth/engine/internal/core"
)

// identityLabel is the label Buildah adds to the images it builds, and its
// value: the Buildah version the engine reports.
const (
	identityLabel   = "io.buildah.version"
	identityVersion = "1.42.0"
)

// job is one build: its context, options and the stages built so far.
type job struct {
	b       *Builder
	opts    core.BuildOptions
	bc      *buildContext
	ex      *excluder
	out     io.Writer
	stages  []instructions.Stage
	global  argEnv
	results map[int]*imageState
	// cache maps cache keys to images; nil when the cache is not used.
	cache map[string]string
	// secrets maps a secret's id to its file.
	secrets map[string]string
	// multi tells whether step lines carry the stage number.
	multi bool
}

// build runs a build in an unpacked (or local) context.
func (b *Builder) build(ctx context.Context, bc *buildContext, opts core.BuildOptions) (id string, err error) {
	text, err := readContainerfiles(bc.dir, opts.Containerfiles)
	if err != nil {
		return "", err
	}
	stages, metaArgs, err := parseContainerfile(text)
	if err != nil {
		return "", err
	}
	global, err := globalArgs(metaArgs, opts.BuildArgs)
	if err != nil {
		return "", err
	}
	target := len(stages) - 1
	if opts.Target != "" {
		if target = stageIndex(stages, len(stages), opts.Target); target < 0 || !strings.EqualFold(stages[target].Name, opts.Target) {
			return "", core.InvalidArgument("target", fmt.Errorf("no stage is named %q", opts.Target))
		}
	}
	j := &job{b: b, opts: opts, bc: bc, stages: stages, global: global, results: map[int]*imageState{}, secrets: map[string]string{}}
	var hidden []string
	for _, s := range opts.Secrets {
		rel := strings.TrimPrefix(path.Clean("/"+s.Source), "/")
		p, err := securejoin.SecureJoin(bc.dir, rel)
		if err != nil {
			return "", err
		}
		j.secrets[s.ID] = p
		hidden = append(hidden, rel)
	}
	if j.ex, err = loadExcluder(bc.dir, hidden); err != nil {
		return "", err
	}
	j.out = io.Discard
	if opts.Progress != nil && !opts.Quiet {
		j.out = opts.Progress
	}
	if opts.Layers && !opts.NoCache {
		if j.cache, err = cacheIndex(b.o.Store.Storage()); err != nil {
			return "", err
		}
	}
	need := neededStages(stages, target, func(i int) []string { return stageRefs(stages[i], global) })
	built := 0
	for _, n := range need {
		if n {
			built++
		}
	}
	j.multi = built > 1
	end := b.o.Transfer.Begin()
	defer func() { end(err != nil) }()

	stageNo := 0
	for i := 0; i <= target; i++ {
		if !need[i] {
			continue
		}
		stageNo++
		last := i == target
		st, err := j.runStage(ctx, i, stageNo, built, last)
		if err != nil {
			return "", err
		}
		j.results[i] = st
	}
	final := j.results[target]
	b.o.Store.Changed()
	return "sha256:" + final.id, nil
}

// stepPrefix is what a step line starts with.
func (j *job) stepPrefix(stageNo, stages int) string {
	if j.multi {
		return fmt.Sprintf("[%d/%d] ", stageNo, stages)
	}
	return ""
}

// runStage builds stage i; when last it also applies the build's labels,
// annotations and names.
func (j *job) runStage(ctx context.Context, i, stageNo, stageCount int, last bool) (*imageState, error) {
	stage := j.stages[i]
	lex := shell.NewLex(parser.DefaultEscapeToken)
	prefix := j.stepPrefix(stageNo, stageCount)
	steps := len(stage.Commands) + 1
	fmt.Fprintf(j.out, "%sSTEP 1/%d: %s\n", prefix, steps, stage.SourceCode)
	baseName, _, err := lex.ProcessWord(stage.BaseName, j.global)
	if err != nil {
		return nil, stepError(stage.SourceCode, err)
	}
	st, err := j.base(ctx, i, baseName)
	if err != nil {
		return nil, stepError(stage.SourceCode, err)
	}
	st.cacheKey = chainKey(st.cacheKey, "format="+j.opts.Format)
	sc := &stageContext{args: argEnv{}, cacheHit: j.cache != nil}
	for n, cmd := range stage.Commands {
		code := commandText(cmd)
		fmt.Fprintf(j.out, "%sSTEP %d/%d: %s\n", prefix, n+2, steps, code)
		if err := j.step(ctx, st, sc, cmd, lex); err != nil {
			return nil, stepError(code, err)
		}
	}
	if st.id == "" || !j.opts.Layers {
		// Nothing committed yet (FROM scratch with metadata only, or no
		// intermediate images): commit the stage's result.
		if err := j.commitAs(st, nil); err != nil {
			return nil, err
		}
	}
	if last {
		return j.finish(st)
	}
	return st, nil
}

// finish applies the build's labels and annotations to the final stage,
// commits it and names it.
func (j *job) finish(st *imageState) (*imageState, error) {
	labels := map[string]string{}
	if j.opts.IdentityLabel {
		labels[identityLabel] = identityVersion
	}
	for _, kv := range j.opts.Labels {
		k, v, _ := cutKV(kv)
		labels[k] = v
	}
	annotations := map[string]string{}
	for _, kv := range j.opts.Annotations {
		k, v, _ := cutKV(kv)
		annotations[k] = v
	}
	final := st
	if len(labels) > 0 || len(annotations) > 0 {
		final = st.clone()
		if final.doc.Config.Labels == nil {
			final.doc.Config.Labels = map[string]string{}
		}
		for k, v := range labels {
			final.doc.Config.Labels[k] = v
		}
		final.cacheKey = chainKey(st.cacheKey, "final", sortedPairs(labels), sortedPairs(annotations))
		if id, ok := j.cached(final.cacheKey); ok {
			cached, err := j.load(id)
			if err != nil {
				return nil, err
			}
			final = cached
		} else {
			t := now()
			final.doc.Created = &t
			if err := j.commitAs(final, annotations); err != nil {
				return nil, err
			}
		}
	}
	if len(j.opts.Tags) > 0 {
		fmt.Fprintf(j.out, "COMMIT %s\n", j.opts.Tags[0])
		if err := j.b.o.Store.Storage().AddNames(final.id, j.opts.Tags); err != nil {
			return nil, fmt.Errorf("naming image: %w", err)
		}
	} else {
		fmt.Fprintln(j.out, "COMMIT")
	}
	fmt.Fprintf(j.out, "--> %.11s\n", final.id)
	for _, tag := range j.opts.Tags {
		fmt.Fprintf(j.out, "Successfully tagged %s\n", tag)
	}
	return final, nil
}

// base resolves a stage's FROM: scratch, an earlier stage or an image
// (pulled as the pull policy says).
func (j *job) base(ctx context.Context, i int, name string) (*imageState, error) {
	if strings.EqualFold(name, "scratch") {
		return scratchState(), nil
	}
	if k := stageIndex(j.stages, i, name); k >= 0 {
		if prev, ok := j.results[k]; ok {
			st := prev.clone()
			return st, nil
		}
	}
	return j.image(ctx, name)
}

// image finds (or pulls) a named image and returns its state.
func (j *job) image(ctx context.Context, name string) (*imageState, error) {
	store := j.b.o.Store
	policy := j.opts.PullPolicy
	if policy != core.PullAlways {
		if img, err := store.Lookup(ctx, name); err == nil {
			if policy != core.PullNewer {
				return j.load(img.ID)
			}
		} else if !errors.Is(err, core.ErrNoSuchImage) {
			return nil, err
		} else if policy == core.PullNever {
			return nil, fmt.Errorf("%s: %w (pull policy never)", name, core.ErrNoSuchImage)
		}
	}
	ref := name
	if _, err := j.b.o.Transfer.Pull(ctx, core.PullOptions{Reference: ref, Policy: policy, Progress: j.out}); err != nil {
		return nil, err
	}
	img, err := store.Lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	return j.load(img.ID)
}

// load reads a stored image by ID.
func (j *job) load(id string) (*imageState, error) {
	img, err := j.b.o.Store.Storage().Image(id)
	if err != nil {
		return nil, fmt.Errorf("image %.12s: %w", id, err)
	}
	st, err := readState(j.b.o.Store.Storage(), img)
	if err != nil {
		return nil, err
	}
	st.cacheKey = chainKey("FROM", img.ID)
	return st, nil
}

// cached returns the image a cache key names, when the cache is in use and
// the image (with its layers) still exists.
func (j *job) cached(key string) (string, bool) {
	if j.cache == nil {
		return "", false
	}
	id, ok := j.cache[key]
	if !ok {
		return "", false
	}
	if _, err := j.b.o.Store.Storage().Image(id); err != nil {
		return "", false
	}
	return id, true
}

// commitAs commits st, carrying its cache key, with the manifest
// annotations given, and records it in the cache index.
func (j *job) commitAs(st *imageState, annotations map[string]string) error {
	id, err := commit(j.b.o.Store.Storage(), st, commitSpec{format: j.opts.Format, annotations: annotations, cacheKey: st.cacheKey})
	if err != nil {
		return err
	}
	st.id = id
	if j.cache != nil {
		j.cache[st.cacheKey] = id
	}
	return nil
}

// chainKey derives a cache key from the previous one and what a step adds.
func chainKey(prev string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(prev))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sortedPairs renders a map in a stable order for cache keys.
func sortedPairs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + m[k] + "\n")
	}
	return b.String()
}

// cutKV splits "key=value".
func cutKV(kv string) (string, string, bool) {
	return strings.Cut(kv, "=")
}

// stepError says which step failed, as Buildah does.
func stepError(code string, err error) error {
	var fe *core.FieldError
	if errors.As(err, &fe) {
		return err
	}
	return &StepError{Step: code, Err: err}
}

// StepError is a failed build step.
type StepError struct {
	Step string
	Err  error
}

// Error reads like Buildah's: building at STEP "RUN false": ...
func (e *StepError) Error() string {
	return fmt.Sprintf("building at STEP %q: %v", e.Step, e.Err)
}

// Unwrap exposes the cause.
func (e *StepError) Unwrap() error { return e.Err }
