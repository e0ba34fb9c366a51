// Package processor runs the processing of uploads: it claims a pending upload (or one
// whose worker died), walks its files in a fixed order and hands each to a Deployer,
// recording progress file by file so that a restart resumes exactly where it stopped.
package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/google/uuid"
)

// Deployer deploys the files of uploads. Files of one upload may depend on each other
// (a unit needs the image an archive loads, a unit sends the files it references along),
// so the Deployer first sees all of them and plans their deployment.
type Deployer interface {
	// Plan returns how the files of the upload whose tree is at dir are deployed. files
	// are the upload's regular files in lexical order of their slash-separated paths.
	// The plan must depend on the files' names and contents only, so that a resumed run
	// deploys them in the same order.
	Plan(dir string, files []string) (Plan, error)
}

// Plan deploys the files of one upload.
type Plan interface {
	// Files returns every file of the upload exactly once, in the order they are
	// deployed.
	Files() []string
	// Deploy deploys the file at rel (a path Files returned) and returns the names of
	// the images it loaded; they are recorded with the file's progress.
	Deploy(ctx context.Context, rel string) ([]string, error)
}

var (
	// ErrUnsupported: the file is of no type the deployer handles. It becomes the file's
	// error entry "unsupported file type".
	ErrUnsupported = errors.New("unsupported file type")
	// ErrUnavailable (wrapped): the deploy target cannot be reached right now. The file is
	// neither recorded nor skipped; the upload stays processing and is retried later with
	// a growing delay.
	ErrUnavailable = errors.New("deploy target unavailable")
	// ErrBundled: the file is deployed together with another one that references it (a
	// quadlet unit's YAML or environment file) and has no deployment of its own. It gets
	// no error entry: the referencing file's entry, if any, speaks for both.
	ErrBundled = errors.New("deployed with the file that references it")
)

// Unsupported is the Deployer used when no engine is configured: every file is an
// "unsupported file type" error entry.
type Unsupported struct{}

// Plan returns a plan that refuses every file, in lexical order, with ErrUnsupported.
func (Unsupported) Plan(_ string, files []string) (Plan, error) {
	return unsupportedPlan(files), nil
}

type unsupportedPlan []string

func (p unsupportedPlan) Files() []string { return p }

func (unsupportedPlan) Deploy(context.Context, string) ([]string, error) {
	return nil, ErrUnsupported
}

// Tree lists the files of an upload and says where they are on disk.
type Tree interface {
	Walk(id string) ([]string, error)
	Dir(id string) string
}

// Observer receives the duration of each processing run that ended an upload.
type Observer func(d time.Duration)

// Config tunes a Worker; zero values take the defaults.
type Config struct {
	// PollInterval is how often the worker looks for work when not woken (default 1s).
	PollInterval time.Duration
	// Lease is how long a claim lasts without renewal (default 15s); a worker that dies
	// leaves its upload to others (or to itself after a restart) after at most this long.
	Lease time.Duration
	// RetryMin and RetryMax bound the delay after ErrUnavailable (defaults 1s and 5m).
	RetryMin, RetryMax time.Duration
	// Observe, if set, gets the duration of every completed processing run.
	Observe Observer
	// OnFile, if set, is told the kind (see FileKind) and outcome ("deployed",
	// "failed", "unsupported" or "bundled") of every file once recorded.
	OnFile func(kind, outcome string)
}

// Worker processes uploads one at a time.
type Worker struct {
	logger   *slog.Logger
	store    store.Store
	tree     Tree
	deployer Deployer
	cfg      Config
	owner    string
	wake     chan struct{}
}

// New returns a Worker; call Run to start it and Wake after an upload became pending.
func New(logger *slog.Logger, st store.Store, tree Tree, deployer Deployer, cfg Config) *Worker {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 5 * time.Minute
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return &Worker{
		logger: logger, store: st, tree: tree, deployer: deployer, cfg: cfg,
		owner: "worker-" + hex.EncodeToString(rnd[:]),
		wake:  make(chan struct{}, 1),
	}
}

// Wake tells the worker that there may be new work; it never blocks.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run processes uploads until ctx is done. An interrupted upload keeps its progress and
// is resumed by the next run (of this or another replica) once its lease has expired.
func (w *Worker) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-w.wake:
		}
		for ctx.Err() == nil {
			worked, err := w.ProcessOne(ctx)
			if err != nil && ctx.Err() == nil {
				w.logger.Error("processing failed", "err", err)
			}
			if !worked || err != nil {
				break
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(w.cfg.PollInterval)
	}
}

// ProcessOne claims and processes one upload; worked is false when none was waiting.
func (w *Worker) ProcessOne(ctx context.Context) (worked bool, err error) {
	u, ok, err := w.store.Claim(ctx, w.owner, w.cfg.Lease)
	if err != nil || !ok {
		return false, err
	}
	start := time.Now()
	log := w.logger.With("upload", u.ID.String())
	done, err := w.process(ctx, log, u)
	if errors.Is(err, store.ErrLostClaim) {
		log.Info("processing stopped: upload deleted or claimed elsewhere")
		return true, nil
	}
	if err != nil {
		return true, fmt.Errorf("upload %s: %w", u.ID, err)
	}
	if done && w.cfg.Observe != nil {
		w.cfg.Observe(time.Since(start))
	}
	return true, nil
}

func (w *Worker) process(ctx context.Context, log *slog.Logger, u store.Upload) (done bool, err error) {
	defer func() {
		if err != nil && ctx.Err() != nil && !errors.Is(err, store.ErrLostClaim) {
			// Stopped in the middle of a store call (counting, recording a file): hand
			// the upload back at once all the same, rather than leave it to the lease.
			err = w.handBack(ctx, u.ID)
		}
	}()
	id := u.ID.String()
	walked, err := w.tree.Walk(id)
	if err != nil {
		return false, err
	}
	plan, err := w.deployer.Plan(w.tree.Dir(id), walked)
	if err != nil {
		return false, fmt.Errorf("planning the deployment: %w", err)
	}
	files := plan.Files()
	if len(files) != len(walked) {
		return false, fmt.Errorf("deployment plan holds %d files, the upload %d", len(files), len(walked))
	}
	if u.FilesTotal == nil {
		if err := w.store.SetTotal(ctx, u.ID, w.owner, len(files)); err != nil {
			return false, err
		}
		log.Info("processing started", "files", len(files))
	} else {
		if *u.FilesTotal != len(files) {
			// Only a change behind the API's back can do this; carry on with what is there
			// rather than leave the upload stuck.
			log.Warn("tree changed since processing began", "counted", *u.FilesTotal, "now", len(files))
		}
		log.Info("processing resumed", "files", len(files), "done", u.FilesProcessed)
	}
	for i := u.FilesProcessed; i < len(files); i++ {
		rel := files[i]
		names, deployErr := w.deploy(ctx, u.ID, plan, rel)
		if ctx.Err() != nil {
			// Shutting down: hand the upload back at once; the unfinished file is
			// deployed again when processing resumes.
			return false, w.handBack(ctx, u.ID)
		}
		if errors.Is(deployErr, ErrUnavailable) {
			delay := w.backoff(u.Attempts)
			log.Warn("deploy target unavailable, retrying later", "file", rel, "retryIn", delay, "err", deployErr)
			return false, w.store.Release(ctx, u.ID, w.owner, time.Now().Add(delay))
		}
		var entry *store.FileError
		switch {
		case errors.Is(deployErr, ErrBundled):
		case errors.Is(deployErr, ErrUnsupported):
			entry = &store.FileError{File: rel, Message: ErrUnsupported.Error()}
		case deployErr != nil:
			entry = &store.FileError{File: rel, Message: deployErr.Error()}
		}
		var images []store.DeployedImage
		if deployErr == nil {
			for _, name := range names {
				images = append(images, store.DeployedImage{File: rel, Name: name})
			}
		}
		if err := w.store.RecordFile(ctx, u.ID, w.owner, i, entry, images, w.cfg.Lease); err != nil {
			return false, err
		}
		if w.cfg.OnFile != nil {
			outcome := "deployed"
			switch {
			case errors.Is(deployErr, ErrBundled):
				outcome = "bundled"
			case errors.Is(deployErr, ErrUnsupported):
				outcome = "unsupported"
			case deployErr != nil:
				outcome = "failed"
			}
			w.cfg.OnFile(FileKind(rel), outcome)
		}
	}
	if err := w.store.Finish(ctx, u.ID, w.owner); err != nil {
		return false, err
	}
	log.Info("processing done", "files", len(files))
	return true, nil
}

// handBack releases the claim on upload id for another worker to resume now; it runs
// even though ctx, the worker's, is already canceled.
func (w *Worker) handBack(ctx context.Context, id uuid.UUID) error {
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return w.store.Release(releaseCtx, id, w.owner, time.Now())
}

// deploy runs the deployer while renewing the claim, so a slow deployment does not lose
// its upload to another replica.
func (w *Worker) deploy(ctx context.Context, id uuid.UUID, plan Plan, rel string) ([]string, error) {
	renewCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(w.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-t.C:
				if err := w.store.Renew(renewCtx, id, w.owner, w.cfg.Lease); err != nil && renewCtx.Err() == nil {
					w.logger.Warn("renewing claim failed", "upload", id.String(), "err", err)
				}
			}
		}
	}()
	return safeDeploy(ctx, plan, rel)
}

// safeDeploy turns a panicking deployer into an error entry for the file instead of a
// crashed process that would retry the same file forever.
func safeDeploy(ctx context.Context, plan Plan, rel string) (names []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			names, err = nil, fmt.Errorf("deployer panicked: %v", p)
		}
	}()
	return plan.Deploy(ctx, rel)
}

func (w *Worker) backoff(attempts int) time.Duration {
	d := w.cfg.RetryMin
	for i := 0; i < attempts && d < w.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, w.cfg.RetryMax)
}

// FileKind names what a file of an upload is by its name, as a metric label:
// image-archive (*.tar, *.tar.gz, *.tgz), quadlet (.container, .pod,
// .volume, .network, .kube, .image, .build), kube (.yaml, .yml) or other.
func FileKind(rel string) string {
	name := strings.ToLower(path.Base(rel))
	switch {
	case strings.HasSuffix(name, ".tar") || strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".tgz"):
		return "image-archive"
	case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
		return "kube"
	}
	switch path.Ext(name) {
	case ".container", ".pod", ".volume", ".network", ".kube", ".image", ".build":
		return "quadlet"
	}
	return "other"
}
