// Package imagestore is the engine's image backend: containers/storage holds
// layers and images, containers/image moves them. It implements core.Images
// (the metadata operations) and gives the transfer and container backends the
// underlying store and system context.
package imagestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/containers/storage/pkg/unshare"

	"github.com/berth-project/berth/engine/internal/backend/platform/mounts"
	"github.com/berth-project/berth/engine/internal/core"
)

// Options configure Open.
type Options struct {
	// Root holds persistent state (layers, images); RunRoot holds runtime state.
	Root, RunRoot string
	// Driver is the storage driver: "overlay", "vfs", or "" for overlay with a
	// vfs fallback when overlay cannot be used here.
	Driver string
	// RegistriesConf is the registries.conf the engine resolves short names
	// with; "" means Root/registries.conf, written on first start.
	RegistriesConf string
	// Logger receives store events (driver fallback, repairs).
	Logger *slog.Logger
}

// Store is the engine's local image store.
type Store struct {
	store          storage.Store
	systemContext  *types.SystemContext
	registriesConf string
	searchRegs     []string
	logger         *slog.Logger
	users          core.ImageUsers
	events         core.EventSink

	// mu serialises name changes and removals so that a listing never sees
	// half of a multi-step operation.
	mu    sync.RWMutex
	cache *summaryCache
	// lists caches the snapshot listings use; nil reads the store each time.
	lists *listCache
	// encoded keeps the unfiltered listings encoded (see ListJSON).
	encoded encodedLists
}

// Open opens (creating if needed) the store under opts.Root and opts.RunRoot.
func Open(opts Options) (*Store, error) {
	if opts.Root == "" || opts.RunRoot == "" {
		return nil, errors.New("image store: root and runroot are required")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	storageRoot := filepath.Join(opts.Root, "storage")
	storageRunRoot := filepath.Join(opts.RunRoot, "storage")
	for _, dir := range []string{storageRoot, storageRunRoot, filepath.Join(opts.Root, "tmp")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	regConf := opts.RegistriesConf
	if regConf == "" {
		regConf = filepath.Join(opts.Root, "registries.conf")
		if err := writeDefaultRegistriesConf(regConf); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	policy := filepath.Join(opts.Root, "policy.json")
	if err := writeDefaultPolicy(policy); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}

	// A removal cut short (or a mount the store did not count) can leave
	// a mount inside a staged deletion; the store's start-up recovery of
	// those directories then fails on it, every time. Nothing else of the
	// store can be in use before it opens.
	if n, err := unmountStaleTempDirs(storageRoot); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	} else if n > 0 {
		logger.Warn("unmounted what a cut deletion left mounted in the store's temporary directories", "mounts", n)
	}

	driver := opts.Driver
	var store storage.Store
	var err error
	switch driver {
	case "":
		store, err = openStorage(storageRoot, storageRunRoot, "overlay")
		if err != nil {
			logger.Warn("overlay storage driver unusable, falling back to vfs", "error", err)
			store, err = openStorage(storageRoot, storageRunRoot, "vfs")
		}
	case "overlay", "vfs":
		store, err = openStorage(storageRoot, storageRunRoot, driver)
	default:
		return nil, core.InvalidArgument("storage-driver", fmt.Errorf("%q is not overlay or vfs", driver))
	}
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}

	s := &Store{
		store:          store,
		registriesConf: regConf,
		logger:         logger,
		cache:          newSummaryCache(),
		events:         core.NoEvents,
	}
	s.systemContext = &types.SystemContext{
		SystemRegistriesConfPath:    regConf,
		SystemRegistriesConfDirPath: filepath.Join(opts.Root, "registries.conf.d"),
		SignaturePolicyPath:         policy,
		BigFilesTemporaryDir:        filepath.Join(opts.Root, "tmp"),
		RegistriesDirPath:           filepath.Join(opts.Root, "registries.d"),
		AuthFilePath:                filepath.Join(opts.RunRoot, "auth.json"),
	}
	regs, err := searchRegistries(s.systemContext)
	if err != nil {
		_, _ = store.Shutdown(true)
		return nil, fmt.Errorf("image store: registries configuration %s: %w", regConf, err)
	}
	s.searchRegs = regs
	s.lists = s.newListCache()
	return s, nil
}

// openStorage opens containers/storage with driver, verifying that the driver
// really works here (overlay needs a filesystem and kernel that allow it).
func openStorage(root, runRoot, driver string) (storage.Store, error) {
	options := storage.StoreOptions{
		RunRoot:         runRoot,
		GraphRoot:       root,
		GraphDriverName: driver,
	}
	if driver == "overlay" && !unshare.IsRootless() {
		options.GraphDriverOptions = []string{"overlay.mountopt=nodev"}
	}
	store, err := storage.GetStore(options)
	if err != nil {
		return nil, fmt.Errorf("storage driver %s: %w", driver, err)
	}
	if _, err := store.GraphDriver(); err != nil {
		_, _ = store.Shutdown(true)
		return nil, fmt.Errorf("storage driver %s: %w", driver, err)
	}
	return store, nil
}

// Storage gives other backends (transfer, containers) the underlying store.
func (s *Store) Storage() storage.Store { return s.store }

// SystemContext is the containers/image context every copy must use, so that
// registries.conf, the signature policy and temporary files are the engine's own.
func (s *Store) SystemContext() *types.SystemContext { return s.systemContext }

// RegistriesConf is the path of the registries configuration in use.
func (s *Store) RegistriesConf() string { return s.registriesConf }

// SearchRegistries are the unqualified-search registries short names resolve through.
func (s *Store) SearchRegistries() []string { return append([]string(nil), s.searchRegs...) }

// SetImageUsers connects the container backend, which tells which containers
// use an image and removes them on forced removal.
func (s *Store) SetImageUsers(users core.ImageUsers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users = users
}

// SetEventSink connects the event bus: tag, untag, remove, pull, push,
// load, save and import are recorded as image events.
func (s *Store) SetEventSink(sink core.EventSink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = sink
}

// emit records an image event (action on the image id, known as name).
func (s *Store) emit(ctx context.Context, action, id, name string) {
	s.events.Emit(ctx, core.Event{Type: core.EventImage, Action: action, ID: id, Name: name})
}

// Changed tells the store that images were added or removed behind its back
// (by a pull or load), so cached listing data is refreshed.
func (s *Store) Changed() {
	s.cache.invalidate()
	if s.lists != nil {
		s.lists.drop()
	}
}

// Shutdown unmounts what the store mounted and releases it. Containers'
// root filesystems that are mounted stay so, with the driver's home, as
// Podman leaves them and as a kill -9 does: a running container's is
// needed on the engine's side too (an exec's user lookup, top's names),
// and the next engine finds them where its records say (a forced unmount
// took them from under running containers, and after a clean restart an
// exec -u NAME found no /etc/passwd). Should the store fail to shut down
// otherwise (it cannot load its layers, say), the driver's home, which the
// overlay driver bind-mounts over itself when it starts, is unmounted all
// the same: a failed start leaves nothing mounted.
func (s *Store) Shutdown() error {
	_, err := s.store.Shutdown(false)
	if errors.Is(err, storage.ErrLayerUsedByContainer) {
		return nil
	}
	if err != nil {
		_, err = s.store.Shutdown(true)
	}
	if err != nil {
		home := filepath.Join(s.store.GraphRoot(), s.store.GraphDriverName())
		if _, uerr := mounts.UnmountUnder(home, func(rel string) bool { return rel == "." }); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}
	return err
}

// unmountStaleTempDirs detaches every mount inside the store's staged
// deletions (DRIVER/tempdirs/temp-dir-N and DRIVER-layers/tmp/temp-dir-N
// under root) so that the store's own recovery can remove them.
func unmountStaleTempDirs(root string) (int, error) {
	return mounts.UnmountUnder(root, func(rel string) bool {
		parts := strings.Split(rel, string(filepath.Separator))
		return len(parts) > 2 && (parts[1] == "tempdirs" || parts[1] == "tmp") && strings.HasPrefix(parts[2], "temp-dir-")
	})
}
