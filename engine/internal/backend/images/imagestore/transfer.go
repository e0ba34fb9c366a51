package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/pkg/compression"
	"github.com/containers/image/v5/signature"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// transferTmpPrefix marks the temporary files and directories of transfers
// under the store's tmp directory, so a restart can remove what a killed
// engine left behind.
const transferTmpPrefix = "transfer-"

// Transfer implements core.ImageTransfer on top of a Store: every move goes
// through containers/image's copy.Image, whose storage destination commits
// an image only once all its layers are complete.
type Transfer struct {
	store  *Store
	logger *slog.Logger
	tmpDir string
	// blobCacheDir keeps containers/image's record of which compressed
	// blobs match which layers in the engine's root, beside storage.
	blobCacheDir string

	// inFlight counts transfers writing to the store; orphaned layers of a
	// failed transfer are only swept when no other transfer may still be
	// about to reference them.
	mu       sync.Mutex
	inFlight int

	// durations records how long each operation took, by outcome.
	durations *prometheus.HistogramVec

	// maxExpanded bounds each stage of what a client's archive expands to
	// (see sizelimit).
	maxExpanded int64
}

// TransferOptions configure NewTransfer.
type TransferOptions struct {
	// Logger receives cleanup events; nil discards them.
	Logger *slog.Logger
	// MaxExpandedSize bounds, in bytes, a received body, its decompressed
	// form and the sum of its layers uncompressed, each; 0 is
	// sizelimit.DefaultMax.
	MaxExpandedSize int64
}

// NewTransfer returns the transfer backend of store. It removes temporary
// files and layers no image or container references, which only a transfer
// interrupted by a crash leaves behind, so it must run before the engine
// serves requests.
func NewTransfer(store *Store, opts TransferOptions) (*Transfer, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &Transfer{
		store:       store,
		logger:      logger,
		tmpDir:      store.SystemContext().BigFilesTemporaryDir,
		maxExpanded: opts.MaxExpandedSize,
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_engine_image_transfer_duration_seconds",
			Help:    "Duration of image transfers (pull, push, load, import, export, scp) by outcome.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"operation", "result"}),
	}
	if t.tmpDir == "" {
		t.tmpDir = os.TempDir()
	}
	t.blobCacheDir = filepath.Join(filepath.Dir(store.Storage().GraphRoot()), "cache")
	for _, dir := range []string{t.tmpDir, t.blobCacheDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("image transfer: %w", err)
		}
	}
	if err := t.removeStaleTemporaries(); err != nil {
		return nil, fmt.Errorf("image transfer: %w", err)
	}
	if removed, err := t.sweepOrphanLayers(time.Time{}); err != nil {
		return nil, fmt.Errorf("image transfer: removing orphaned layers: %w", err)
	} else if removed > 0 {
		logger.Info("removed layers left by an interrupted transfer", "layers", removed)
	}
	return t, nil
}

var _ core.ImageTransfer = (*Transfer)(nil)

// RegisterMetrics adds the transfer duration histogram
// (berth_engine_image_transfer_duration_seconds{operation,result}) to registry.
func (t *Transfer) RegisterMetrics(registry prometheus.Registerer) error {
	return registry.Register(t.durations)
}

// observe records one operation's duration; result is ok, client_error
// (a bad argument or unknown image), canceled or error.
func (t *Transfer) observe(op string, start time.Time, errp *error) {
	result := "ok"
	switch err := *errp; {
	case err == nil:
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		result = "canceled"
	case errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrNoSuchImage):
		result = "client_error"
	default:
		result = "error"
	}
	t.durations.WithLabelValues(op, result).Observe(time.Since(start).Seconds())
}

// removeStaleTemporaries deletes what earlier transfers left in the tmp
// directory (containers/image's own staging directories included).
func (t *Transfer) removeStaleTemporaries() error {
	entries, err := os.ReadDir(t.tmpDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, transferTmpPrefix) || strings.HasPrefix(name, "container_images_") ||
			strings.HasPrefix(name, "docker-tar") || strings.HasPrefix(name, "oci") {
			if err := os.RemoveAll(filepath.Join(t.tmpDir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// begin registers a transfer that may write layers; the returned function
// ends it and, when the transfer failed, sweeps the layers it orphaned.
func (t *Transfer) begin() (end func(failed bool)) {
	start := time.Now()
	t.mu.Lock()
	t.inFlight++
	t.mu.Unlock()
	return func(failed bool) {
		t.mu.Lock()
		t.inFlight--
		alone := t.inFlight == 0
		t.mu.Unlock()
		t.store.Changed()
		if failed && alone {
			if n, err := t.sweepOrphanLayers(start.Add(-time.Second)); err != nil {
				t.logger.Warn("removing layers of a failed transfer", "error", err)
			} else if n > 0 {
				t.logger.Info("removed layers of a failed transfer", "layers", n)
			}
		}
	}
}

// sweepOrphanLayers deletes layers created at or after since that no image
// and no container references (directly or as a parent). A zero since sweeps
// every such layer. It returns how many layers it removed.
func (t *Transfer) sweepOrphanLayers(since time.Time) (int, error) {
	st := t.store.Storage()
	removed := 0
	for round := 0; round < 128; round++ {
		layers, err := st.Layers()
		if err != nil {
			return removed, err
		}
		images, err := st.Images()
		if err != nil {
			return removed, err
		}
		containers, err := st.Containers()
		if err != nil {
			return removed, err
		}
		parent := make(map[string]string, len(layers))
		hasChild := make(map[string]bool, len(layers))
		for _, l := range layers {
			parent[l.ID] = l.Parent
			if l.Parent != "" {
				hasChild[l.Parent] = true
			}
		}
		used := make(map[string]bool, len(layers))
		mark := func(id string) {
			for id != "" && !used[id] {
				used[id] = true
				id = parent[id]
			}
		}
		for _, img := range images {
			mark(img.TopLayer)
			for _, l := range img.MappedTopLayers {
				mark(l)
			}
		}
		for _, c := range containers {
			mark(c.LayerID)
		}
		progress := false
		for _, l := range layers {
			if used[l.ID] || hasChild[l.ID] {
				continue
			}
			if !since.IsZero() && l.Created.Before(since) {
				continue
			}
			if err := st.DeleteLayer(l.ID); err != nil && !errors.Is(err, storage.ErrLayerUnknown) {
				return removed, fmt.Errorf("deleting layer %s: %w", l.ID, err)
			}
			removed++
			progress = true
		}
		if !progress {
			return removed, nil
		}
	}
	return removed, nil
}

// policyContext accepts what the engine's signature policy accepts (by
// default everything): signatures are checked the way every Podman copy is.
func (t *Transfer) policyContext() (*signature.PolicyContext, error) {
	policy, err := signature.DefaultPolicy(t.store.SystemContext())
	if err != nil {
		return nil, fmt.Errorf("reading signature policy: %w", err)
	}
	pc, err := signature.NewPolicyContext(policy)
	if err != nil {
		return nil, fmt.Errorf("signature policy: %w", err)
	}
	return pc, nil
}

// systemContext returns a copy of the store's context for one operation.
func (t *Transfer) systemContext() *types.SystemContext {
	sys := *t.store.SystemContext()
	if sys.BlobInfoCacheDir == "" {
		sys.BlobInfoCacheDir = t.blobCacheDir
	}
	return &sys
}

// copyImage runs copy.Image with the engine's policy and fast defaults:
// parallel blob copies and gzip at the fastest level when a destination
// must compress.
func (t *Transfer) copyImage(ctx context.Context, dest, src types.ImageReference, opts *copy.Options) ([]byte, error) {
	pc, err := t.policyContext()
	if err != nil {
		return nil, err
	}
	defer func() { _ = pc.Destroy() }()
	if opts.SourceCtx == nil {
		opts.SourceCtx = t.systemContext()
	}
	if opts.DestinationCtx == nil {
		opts.DestinationCtx = t.systemContext()
	}
	if opts.DestinationCtx.CompressionFormat == nil {
		opts.DestinationCtx.CompressionFormat = &compression.Gzip
	}
	if opts.DestinationCtx.CompressionLevel == nil {
		level := fastCompressionLevel
		opts.DestinationCtx.CompressionLevel = &level
	}
	if opts.MaxParallelDownloads == 0 {
		opts.MaxParallelDownloads = 6
	}
	return copy.Image(ctx, pc, dest, src, opts)
}

// fastCompressionLevel is gzip's "best speed": layers leave the engine at
// wire speed, a little larger than at the default level.
const fastCompressionLevel = 1

// isStorageFault reports whether err comes from the engine's own disk rather
// than from what a client sent.
func isStorageFault(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EIO)
}

// tempFile creates a transfer temporary file in the store's tmp directory.
func (t *Transfer) tempFile(pattern string) (*os.File, error) {
	return os.CreateTemp(t.tmpDir, transferTmpPrefix+pattern)
}

// budget is a fresh bound for one stage of one transfer; what names the
// content in the error.
func (t *Transfer) budget(what string) *sizelimit.Budget {
	return sizelimit.New(t.maxExpanded, what)
}

// receiveBody copies a request body r into a new temporary file (see
// tempFile) and returns its path, which the caller removes. what names the
// body in errors and is the argument a bad body is reported against. A
// cancelled ctx returns ctx's error, a body over the size bound a
// core.ErrTooLarge, a fault of the engine's own disk a plain error, and a
// body that cannot be read an ErrInvalidArgument; on any error the file is
// already gone.
func (t *Transfer) receiveBody(ctx context.Context, r io.Reader, pattern, what string) (string, error) {
	return t.spool(ctx, r, pattern, what, "reading the request body")
}

// spool copies r, bounded by a fresh budget named what, into a new
// temporary file and returns its path; errors are classified as
// receiveBody's, doing describes the copy in them.
func (t *Transfer) spool(ctx context.Context, r io.Reader, pattern, what, doing string) (string, error) {
	f, err := t.tempFile(pattern)
	if err != nil {
		return "", fmt.Errorf("receiving %s: %w", what, err)
	}
	_, err = t.budget(what).Copy(ctx, f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return f.Name(), nil
	}
	os.Remove(f.Name())
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, core.ErrTooLarge):
		return "", err
	case isStorageFault(err):
		return "", fmt.Errorf("receiving %s: %w", what, err)
	}
	return "", core.InvalidArgument(what, fmt.Errorf("%s: %w", doing, err))
}

// tempDir creates a transfer temporary directory in the store's tmp directory.
func (t *Transfer) tempDir(pattern string) (string, error) {
	return os.MkdirTemp(t.tmpDir, transferTmpPrefix+pattern)
}

// Copy is copyImage for other backends (artifacts): copy.Image under the
// engine's signature policy.
func (t *Transfer) Copy(ctx context.Context, dest, src types.ImageReference, opts *copy.Options) ([]byte, error) {
	return t.copyImage(ctx, dest, src, opts)
}

// ClassifyError maps registry errors to the engine's domain errors (see
// classifyRegistryError).
func (t *Transfer) ClassifyError(err error) error { return classifyRegistryError(err) }
