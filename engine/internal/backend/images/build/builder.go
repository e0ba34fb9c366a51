// Package build builds images from a Containerfile and a build context.
// Containerfiles are parsed by BuildKit's dockerfile parser and
// instructions packages; RUN steps run under the engine's OCI runtime with
// the engine's spec generation (mounts, rlimits, capabilities); every step
// that changes files becomes a layer in containers/storage, and with layers
// on every instruction leaves an intermediate image that later builds reuse.
package build

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
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// Options configure a Builder.
type Options struct {
	// Store holds images and layers; Transfer pulls FROM images.
	Store    *imagestore.Store
	Transfer *imagestore.Transfer
	// Runtime runs RUN steps.
	Runtime *runtime.Runtime
	// Host limits what a RUN step may be granted.
	Host oci.Host
	// AppArmorProfile confines RUN steps ("" where the host has no
	// AppArmor): the engine's default container profile.
	AppArmorProfile string
	// CDI resolves and applies the CDI devices RUN steps ask for (nil:
	// every build that asks for one is refused).
	CDI core.CDIRegistry
	// HostResolv is the resolv.conf RUN steps start from.
	HostResolv []byte
	// Root is the engine's persistent state directory: build contexts are
	// spooled and unpacked under ROOT/tmp and RUN --mount=type=cache directories live in
	// ROOT/build-cache.
	Root string
	// RunRoot holds the bundles of RUN steps (RUNROOT/build).
	RunRoot string
	// MaxContextSize bounds the expanded size of a context tar stream
	// (0 = sizelimit.DefaultMax).
	MaxContextSize int64
	// CgroupParent is the cgroupfs parent of RUN steps ("/berth").
	CgroupParent string
	Logger       *slog.Logger
}

// Builder implements core.Builder.
type Builder struct {
	o Options
	// cacheLock is held shared by each build and exclusively by a prune of
	// the build cache.
	cacheLock sync.RWMutex
}

// runPrefix starts the runtime IDs of RUN steps.
const runPrefix = "berth-build-"

// tmpPrefix marks unpacked contexts and RUN bundles, so a restart can remove
// what a killed engine left behind.
const tmpPrefix = "build-"

// New returns a builder and removes the RUN containers and temporary
// directories an earlier engine process left behind.
func New(o Options) (*Builder, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CgroupParent == "" {
		o.CgroupParent = "/berth"
	}
	b := &Builder{o: o}
	if o.Runtime != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := o.Runtime.RemoveStale(ctx, runPrefix)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("build: removing RUN containers of an earlier engine: %w", err)
		}
	}
	for _, dir := range []string{b.tmpDir(), b.bundleDir(), b.cacheDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
	}
	for _, dir := range []string{b.tmpDir(), b.bundleDir()} {
		stale, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"*"))
		for _, p := range stale {
			if err := os.RemoveAll(p); err != nil {
				return nil, fmt.Errorf("build: removing %s: %w", p, err)
			}
		}
	}
	return b, nil
}

func (b *Builder) tmpDir() string    { return filepath.Join(b.o.Root, "tmp") }
func (b *Builder) bundleDir() string { return filepath.Join(b.o.RunRoot, "build") }
func (b *Builder) cacheDir() string  { return filepath.Join(b.o.Root, "build-cache") }

// Build implements core.Builder.
func (b *Builder) Build(ctx context.Context, contextTar io.Reader, opts core.BuildOptions) (string, error) {
	if err := validate(&opts); err != nil {
		return "", err
	}
	if err := b.checkDevices(opts.Devices); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(b.tmpDir(), tmpPrefix+"context-")
	if err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	defer os.RemoveAll(dir)
	ph := newPhases()
	bc, err := receiveContext(ctx, timedReader{contextTar, ph}, dir, b.tmpDir(), sizelimit.New(b.o.MaxContextSize, "build context"), ph)
	if err != nil {
		return "", err
	}
	defer bc.close()
	id, err := b.build(ctx, bc, opts, ph)
	ph.log(b.o.Logger, "build finished", "image", id, "failed", err != nil, "context_extracted", bc.extracted)
	return id, err
}

// BuildDir implements core.Builder: dir must be an absolute, clean path to
// a directory.
func (b *Builder) BuildDir(ctx context.Context, dir string, opts core.BuildOptions) (string, error) {
	if err := validate(&opts); err != nil {
		return "", err
	}
	if err := b.checkDevices(opts.Devices); err != nil {
		return "", err
	}
	if err := checkLocalDir(dir); err != nil {
		return "", err
	}
	if err := checkLocalContainerfiles(dir, opts.Containerfiles); err != nil {
		return "", err
	}
	ph := newPhases()
	id, err := b.build(ctx, &buildContext{dir: dir}, opts, ph)
	ph.log(b.o.Logger, "build finished", "image", id, "failed", err != nil)
	return id, err
}

// checkLocalDir accepts an absolute path without "." or ".." elements that
// names a directory.
func checkLocalDir(dir string) error {
	const field = "localcontextdir"
	if dir == "" {
		return core.InvalidArgument(field, errors.New("is required"))
	}
	if !filepath.IsAbs(dir) {
		return core.InvalidArgument(field, fmt.Errorf("%q is not an absolute path", dir))
	}
	if filepath.Clean(dir) != dir && filepath.Clean(dir)+"/" != dir {
		return core.InvalidArgument(field, fmt.Errorf("%q is not a clean path (no . or .. elements)", dir))
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: file does not exist: %q: %w", field, dir, core.ErrNoSuchPath)
	}
	if err != nil {
		return core.InvalidArgument(field, err)
	}
	if !fi.IsDir() {
		return core.InvalidArgument(field, fmt.Errorf("%q is not a directory", dir))
	}
	return nil
}

// checkLocalContainerfiles answers ErrNoSuchPath (404, as Podman's local
// build does) for a named Containerfile that is not in the local context.
func checkLocalContainerfiles(dir string, names []string) error {
	for _, name := range names {
		if strings.Contains(name, "://") {
			continue // refused with its own words when read
		}
		p := filepath.Join(dir, filepath.Clean("/"+name))
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("dockerfile: file does not exist: %q: %w", p, core.ErrNoSuchPath)
		}
	}
	return nil
}

// validate checks the options that do not depend on the context and fills
// defaults.
func validate(opts *core.BuildOptions) error {
	switch opts.Format {
	case "", "oci":
		opts.Format = "oci"
	case "docker":
		if len(opts.Annotations) > 0 {
			return core.InvalidArgument("annotations", errors.New("annotations need the oci format"))
		}
	default:
		return core.InvalidArgument("format", fmt.Errorf("%q is not oci or docker", opts.Format))
	}
	if opts.PullPolicy == "" {
		opts.PullPolicy = core.PullMissing
	}
	if opts.Network == "" {
		opts.Network = core.BuildNetworkPrivate
	}
	opts.SeccompProfile = nil
	if oci.CustomSeccompProfile(&core.ContainerSpec{SeccompProfilePath: opts.SeccompProfilePath}) {
		profile, err := seccomp.LoadFile(opts.SeccompProfilePath)
		if err != nil {
			return core.InvalidArgument("seccomp", err)
		}
		opts.SeccompProfile = profile
	}
	for i, tag := range opts.Tags {
		name, err := imagestore.TagName("t", tag)
		if err != nil {
			return err
		}
		opts.Tags[i] = name
	}
	for _, field := range []struct {
		name string
		kvs  []string
	}{{"labels", opts.Labels}, {"annotations", opts.Annotations}} {
		for _, kv := range field.kvs {
			if k, _, _ := cutKV(kv); k == "" {
				return core.InvalidArgument(field.name, fmt.Errorf("%q has no key", kv))
			}
		}
	}
	seen := map[string]bool{}
	for _, s := range opts.Secrets {
		if s.ID == "" || s.Source == "" {
			return core.InvalidArgument("secrets", errors.New("a secret needs an id and a src"))
		}
		if seen[s.ID] {
			return core.InvalidArgument("secrets", fmt.Errorf("secret %q is given twice", s.ID))
		}
		seen[s.ID] = true
	}
	if _, err := parseUlimits(opts.Ulimits); err != nil {
		return err
	}
	return nil
}
