package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/containers/storage"
	"io"
	"path"
	"sort"
	"strings"
	"time"

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
	// secrets maps a secret's id to its file, once the context is on disk.
	secrets map[string]string
	// multi tells whether step lines carry the stage number.
	multi bool
	// temporary are the images committed by a build without layers, removed
	// once the final image exists.
	temporary []string
	// ph adds up the time of the build's phases.
	ph *phases
}

// build runs a build in an unpacked (or local) context.
func (b *Builder) build(ctx context.Context, bc *buildContext, opts core.BuildOptions, ph *phases) (id string, err error) {
	b.cacheLock.RLock()
	defer b.cacheLock.RUnlock()
	text, err := readContainerfiles(bc.files(), bc.dir, opts.Containerfiles)
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
	j := &job{b: b, opts: opts, bc: bc, stages: stages, global: global, results: map[int]*imageState{}, ph: ph}
	var hidden []string
	for _, s := range opts.Secrets {
		hidden = append(hidden, secretPath(s))
	}
	if j.ex, err = loadExcluder(bc.files(), bc.dir, hidden); err != nil {
		return "", err
	}
	j.out = io.Discard
	if opts.Progress != nil && !opts.Quiet {
		j.out = opts.Progress
	}
	if opts.Layers {
		// A nocache build looks nothing up but still records its steps'
		// keys, so that the next build can reuse them (as Buildah's
		// intermediate images are).
		start := time.Now()
		j.cache = map[string]string{}
		if !opts.NoCache {
			if j.cache, err = cacheIndex(b.o.Store.Storage()); err != nil {
				return "", err
			}
		}
		ph.since(phaseCache, start)
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
	defer func() {
		if err != nil {
			j.dropIntermediates("")
		}
		end(err != nil)
	}()

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

// secretPath is a secret's file as a path relative to the context.
func secretPath(s core.BuildSecret) string {
	return strings.TrimPrefix(path.Clean("/"+s.Source), "/")
}

// materialize puts the context on disk for a step that runs (its files
// are copied or mounted) and resolves the secrets' files in it.
func (j *job) materialize(ctx context.Context) error {
	if j.secrets != nil {
		return nil
	}
	if err := j.bc.materialize(ctx); err != nil {
		return err
	}
	secrets := map[string]string{}
	for _, s := range j.opts.Secrets {
		p, err := securejoin.SecureJoin(j.bc.dir, secretPath(s))
		if err != nil {
			return err
		}
		secrets[s.ID] = p
	}
	j.secrets = secrets
	return nil
}

// stepPrefix is what a step line starts with.
func (j *job) stepPrefix(stageNo, stages int) string {
	if j.multi {
		return fmt.Sprintf("[%d/%d] ", stageNo, stages)
	}
	return ""
}

// runStage builds stage i; when last its final step also gets the
// build's labels and annotations.
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
		sc.final = last && n == len(stage.Commands)-1
		code := commandText(cmd)
		fmt.Fprintf(j.out, "%sSTEP %d/%d: %s\n", prefix, n+2, steps, code)
		if err := j.step(ctx, st, sc, cmd, lex); err != nil {
			return nil, stepError(code, err)
		}
	}
	if last && (len(stage.Commands) == 0 || st.id == "") {
		// A final stage without instructions still gets the labels.
		sc.final = true
		if err := j.finishStep(ctx, st, sc, chainKey(st.cacheKey, "final"), nil, "", true); err != nil {
			return nil, err
		}
	}
	if last {
		return j.finish(st)
	}
	return st, nil
}

// finalLabels are the labels the build adds to its image.
func (j *job) finalLabels() map[string]string {
	labels := map[string]string{}
	if j.opts.IdentityLabel {
		labels[identityLabel] = identityVersion
	}
	for _, kv := range j.opts.Labels {
		k, v, _ := cutKV(kv)
		labels[k] = v
	}
	return labels
}

// finalAnnotations are the manifest annotations the build asked for.
func (j *job) finalAnnotations() map[string]string {
	annotations := map[string]string{}
	for _, kv := range j.opts.Annotations {
		k, v, _ := cutKV(kv)
		annotations[k] = v
	}
	return annotations
}

// finish names the final image and removes the intermediate images of a
// build without layers.
func (j *job) finish(st *imageState) (*imageState, error) {
	store := j.b.o.Store.Storage()
	if len(j.opts.Tags) > 0 {
		fmt.Fprintf(j.out, "COMMIT %s\n", j.opts.Tags[0])
		if err := store.AddNames(st.id, j.opts.Tags); err != nil {
			return nil, fmt.Errorf("naming image: %w", err)
		}
	} else {
		fmt.Fprintln(j.out, "COMMIT")
	}
	fmt.Fprintf(j.out, "--> %.11s\n", st.id)
	for _, tag := range j.opts.Tags {
		fmt.Fprintf(j.out, "Successfully tagged %s\n", tag)
	}
	j.dropIntermediates(st.id)
	return st, nil
}

// dropIntermediates removes the images a build without layers committed
// on the way to keep.
func (j *job) dropIntermediates(keep string) {
	store := j.b.o.Store.Storage()
	for i := len(j.temporary) - 1; i >= 0; i-- {
		id := j.temporary[i]
		if id == keep {
			continue
		}
		if _, err := store.DeleteImage(id, true); err != nil && !errors.Is(err, storage.ErrImageUnknown) {
			j.b.o.Logger.Warn("removing an intermediate build image", "image", id, "err", err)
		}
	}
	j.temporary = nil
}

// base resolves a stage's FROM: scratch, an earlier stage or an image
// (pulled as the pull policy says).
func (j *job) base(ctx context.Context, i int, name string) (*imageState, error) {
	if strings.EqualFold(name, "scratch") {
		return scratchState(), nil
	}
	if k := stageIndex(j.stages, i, name); k >= 0 {
		if prev, ok := j.results[k]; ok {
			return prev.clone(), nil
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
	if err := j.pull(ctx, name, policy); err != nil {
		return nil, err
	}
	img, err := store.Lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	return j.load(img.ID)
}

// pull pulls a FROM image, trying again up to PullRetries times,
// PullRetryDelay apart, after a failure that another try may meet (a
// registry that did not answer or failed), as Podman's builds do.
func (j *job) pull(ctx context.Context, name string, policy core.PullPolicy) error {
	_, err := j.b.o.Transfer.Pull(ctx, core.PullOptions{
		Reference: name, Policy: policy, Auth: j.opts.Auth, TLSVerify: j.opts.TLSVerify, Progress: j.out,
		TransferRetries: core.TransferRetries{Retries: j.opts.PullRetries, RetryDelay: j.opts.PullRetryDelay},
	})
	return err
}

// load reads a stored image by ID.
func (j *job) load(id string) (*imageState, error) {
	img, err := j.b.o.Store.Storage().Image(id)
	if err != nil {
		return nil, fmt.Errorf("image %.12s: %w", id, err)
	}
	cfg, err := j.b.o.Store.RuntimeConfigOf(id)
	if err != nil {
		return nil, err
	}
	return &imageState{id: img.ID, topLayer: img.TopLayer, config: cfg, cacheKey: chainKey("FROM", img.ID)}, nil
}

// cached returns the image a cache key names, when the cache is in use and
// the image still exists.
func (j *job) cached(key string) (*storage.Image, bool) {
	defer j.ph.since(phaseCache, time.Now())
	if j.cache == nil || j.opts.NoCache {
		return nil, false
	}
	id, ok := j.cache[key]
	if !ok {
		return nil, false
	}
	img, err := j.b.o.Store.Storage().Image(id)
	if err != nil {
		return nil, false
	}
	return img, true
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
