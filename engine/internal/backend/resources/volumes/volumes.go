// Package volumes implements core.Volumes with the local driver: each volume
// is a directory ROOT/NAME/_data, its metadata a row of the state database.
// A volume is created directory first, record second, and removed record
// first, directory second; Open deletes directories left without a record
// by a crash in between.
package volumes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/durable"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// Driver is the only volume driver the engine has.
const Driver = "local"

// Store is the engine's volume backend.
type Store struct {
	db     *state.DB
	root   string
	logger *slog.Logger

	// mu serialises changes (create, remove, prune) so that a name check and
	// its write cannot interleave with another change.
	mu     sync.Mutex
	users  core.VolumeUsers
	events func(ctx context.Context, action, name, driver string)
	// maxImport bounds what an import may unpack (0: sizelimit's default).
	maxImport int64
}

var _ core.Volumes = (*Store)(nil)

// Open returns the volume store rooted at root (created if needed) and
// removes volume directories that have no record.
func Open(ctx context.Context, db *state.DB, root string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	s := &Store{db: db, root: root, logger: logger}
	recs, err := db.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	recorded, leftovers, err := durable.Sweep(root, recs, func(r state.VolumeRecord) string { return r.Name })
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	for _, name := range leftovers {
		if err := unmountData(filepath.Join(root, name, "_data")); err != nil {
			logger.Warn("volume directory without record left in place: still mounted", "volume", name, "err", err)
			continue
		}
		logger.Info("deleting volume directory without record", "volume", name)
		os.RemoveAll(filepath.Join(root, name))
	}
	for _, name := range recorded {
		// An import cut short leaves its staging directory.
		staged, _ := filepath.Glob(filepath.Join(root, name, importPrefix+"*"))
		for _, dir := range staged {
			os.RemoveAll(dir)
		}
	}
	return s, nil
}

// SetMaxImportSize bounds what one import may unpack (the engine's
// --max-expanded-size).
func (s *Store) SetMaxImportSize(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxImport = n
}

// SetUsers connects the container backend, which knows which containers
// mount which volume. Without it every volume counts as unused.
func (s *Store) SetUsers(u core.VolumeUsers) {
	s.mu.Lock()
	s.users = u
	s.mu.Unlock()
}

// SetEventSink sets what is called after a volume is created ("create") or
// removed ("remove"), with the volume's driver.
func (s *Store) SetEventSink(fn func(ctx context.Context, action, name, driver string)) {
	s.mu.Lock()
	s.events = fn
	s.mu.Unlock()
}

// emit reports an event; s.mu must be held.
func (s *Store) emit(ctx context.Context, action, name string) {
	if s.events != nil {
		s.events(ctx, action, name, Driver)
	}
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Create creates a volume.
func (s *Store) Create(ctx context.Context, o core.VolumeCreateOptions) (*core.Volume, error) {
	ctx = context.WithoutCancel(ctx)
	if o.Driver != "" && o.Driver != Driver {
		return nil, core.InvalidArgument("Driver", fmt.Errorf("%q is not a volume driver (local)", o.Driver))
	}
	name := o.Name
	if name == "" {
		b := make([]byte, 32)
		rand.Read(b)
		name = hex.EncodeToString(b)
	} else if len(name) > 255 || !validName.MatchString(name) {
		return nil, core.InvalidArgument("Name", fmt.Errorf("%q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", name))
	}
	v := &core.Volume{
		Name: name, Driver: Driver, Scope: "local", CreatedAt: time.Now().Truncate(time.Second),
		Mountpoint: filepath.Join(s.root, name, "_data"),
		Labels:     map[string]string{}, Options: map[string]string{},
		Anonymous: o.Anonymous, NeedsCopyUp: true,
	}
	for k, val := range o.Label {
		v.Labels[k] = val
	}
	for k, val := range o.Labels {
		v.Labels[k] = val
	}
	for k, val := range o.Options {
		switch strings.ToLower(k) {
		case "uid", "gid":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return nil, core.InvalidArgument("Options", fmt.Errorf("%s=%q must be a non-negative number", k, val))
			}
			if strings.ToLower(k) == "uid" {
				v.UID = n
			} else {
				v.GID = n
			}
		case "o", "type", "device":
		default:
			return nil, core.InvalidArgument("Options", fmt.Errorf("option %q is not supported by the local driver (UID, GID, o, type, device)", k))
		}
		v.Options[k] = val
	}
	ms, err := parseMountOptions(o.Options)
	if err != nil {
		return nil, err
	}
	if uid, gid, set, err := directoryOwner(o.Options); err != nil {
		return nil, err
	} else if set {
		v.UID, v.GID = uid, gid
	}
	for field, id := range map[string]*int{"UID": o.UID, "GID": o.GID} {
		if id == nil {
			continue
		}
		if *id < 0 {
			return nil, core.InvalidArgument(field, fmt.Errorf("%d is not a user or group ID", *id))
		}
		if field == "UID" {
			v.UID = *id
		} else {
			v.GID = *id
		}
	}
	if ms != nil || strings.Contains(","+optionValue(o.Options, "o")+",", ",nocopy,") {
		// A mounted volume's content lives in its mount: nothing to copy up.
		v.NeedsCopyUp = false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if data, err := s.db.GetVolume(ctx, name); err == nil {
		if o.IgnoreIfExists && o.Name != "" {
			return decode(data)
		}
		return nil, fmt.Errorf("volume with name %s already exists: %w", name, core.ErrVolumeExists)
	} else if !errors.Is(err, state.ErrNotFound) {
		return nil, err
	}
	dir := filepath.Join(s.root, name)
	// A directory without record is what a crash left behind.
	if err := unmountData(filepath.Join(dir, "_data")); err != nil {
		return nil, fmt.Errorf("create volume %s: %w", name, err)
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(v.Mountpoint, 0o755); err != nil {
		return nil, fmt.Errorf("create volume %s: %w", name, err)
	}
	if v.UID != 0 || v.GID != 0 {
		if err := os.Chown(v.Mountpoint, v.UID, v.GID); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("create volume %s: %w", name, err)
		}
	}
	data, err := json.Marshal(v)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.db.AddVolume(ctx, state.VolumeRecord{Name: name, Created: v.CreatedAt, Data: data}); err != nil {
		os.RemoveAll(dir)
		if errors.Is(err, state.ErrDuplicate) {
			return nil, fmt.Errorf("volume with name %s already exists: %w", name, core.ErrVolumeExists)
		}
		return nil, err
	}
	if o.OnCreate != nil {
		o.OnCreate(name)
	}
	s.emit(ctx, "create", name)
	return v, nil
}

func (s *Store) get(ctx context.Context, name string) (*core.Volume, error) {
	r, err := s.db.GetVolume(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, core.NoSuchVolume(name)
	}
	if err != nil {
		return nil, err
	}
	return decode(r)
}

func decode(r state.VolumeRecord) (*core.Volume, error) {
	var v core.Volume
	if err := json.Unmarshal(r.Data, &v); err != nil {
		return nil, fmt.Errorf("volume %s: corrupt record: %w", r.Name, err)
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	if v.Options == nil {
		v.Options = map[string]string{}
	}
	return &v, nil
}

// Inspect returns one volume.
func (s *Store) Inspect(ctx context.Context, name string) (*core.Volume, error) {
	if name == "" {
		return nil, core.InvalidArgument("name", errors.New("a volume name is required"))
	}
	return s.get(ctx, name)
}

// MarkCopiedUp clears NeedsCopyUp.
func (s *Store) MarkCopiedUp(ctx context.Context, name string) error {
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	if !v.NeedsCopyUp {
		return nil
	}
	v.NeedsCopyUp = false
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.db.UpdateVolume(ctx, state.VolumeRecord{Name: name, Data: data})
}

func (s *Store) usersOf(ctx context.Context, name string) ([]string, error) {
	if s.users == nil {
		return nil, nil
	}
	return s.users.ContainersUsingVolume(ctx, name)
}

func (s *Store) all(ctx context.Context) ([]*core.Volume, error) {
	recs, err := s.db.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*core.Volume, 0, len(recs))
	for _, r := range recs {
		v, err := decode(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// List returns the volumes matching filters.
func (s *Store) List(ctx context.Context, filters map[string][]string) ([]*core.Volume, error) {
	match, err := s.compile(filters, "name", "label", "label!", "driver", "scope", "dangling", "anonymous", "until")
	if err != nil {
		return nil, err
	}
	vols, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	return match.Keep(ctx, vols)
}

// Remove removes a volume.
func (s *Store) Remove(ctx context.Context, name string, force bool) error {
	return s.remove(ctx, name, force, nil)
}

// RemoveForced implements core.Volumes.
func (s *Store) RemoveForced(ctx context.Context, name string, timeout uint) error {
	return s.remove(ctx, name, true, &timeout)
}

func (s *Store) remove(ctx context.Context, name string, force bool, timeout *uint) error {
	ctx = context.WithoutCancel(ctx)
	if name == "" {
		return core.InvalidArgument("name", errors.New("a volume name is required"))
	}
	if _, err := s.get(ctx, name); err != nil {
		return err
	}
	s.mu.Lock()
	users := s.users
	s.mu.Unlock()
	ids, err := s.usersOf(ctx, name)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		if !force {
			return fmt.Errorf("volume %s is being used by the following container(s): %s: %w", name, strings.Join(ids, ", "), core.ErrVolumeInUse)
		}
		for _, id := range ids {
			remove := users.RemoveContainer
			if timeout != nil {
				remove = func(ctx context.Context, id string) error { return users.RemoveContainerWithin(ctx, id, *timeout) }
			}
			if err := remove(ctx, id); err != nil && !errors.Is(err, core.ErrNoSuchContainer) {
				return fmt.Errorf("remove container %s using volume %s: %w", id, name, err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(ctx, name)
}

func (s *Store) removeLocked(ctx context.Context, name string) error {
	// A container created between the check and here would lose its volume.
	if ids, err := s.usersOf(ctx, name); err != nil {
		return err
	} else if len(ids) > 0 {
		return fmt.Errorf("volume %s is being used by the following container(s): %s: %w", name, strings.Join(ids, ", "), core.ErrVolumeInUse)
	}
	if err := s.db.RemoveVolume(ctx, name); err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return core.NoSuchVolume(name)
		}
		return err
	}
	// Never delete through a mount (a bind volume's host directory).
	if err := unmountData(filepath.Join(s.root, name, "_data")); err != nil {
		s.logger.Warn("volume directory left in place: still mounted", "volume", name, "err", err)
	} else if err := os.RemoveAll(filepath.Join(s.root, name)); err != nil {
		s.logger.Warn("delete volume directory", "volume", name, "err", err)
	}
	s.emit(ctx, "remove", name)
	return nil
}

// Prune removes unused volumes matching filters.
func (s *Store) Prune(ctx context.Context, filters map[string][]string) ([]core.PruneReport, error) {
	return s.prune(ctx, filters, true)
}

// PruneDryRun answers what Prune would remove.
func (s *Store) PruneDryRun(ctx context.Context, filters map[string][]string) ([]core.PruneReport, error) {
	return s.prune(ctx, filters, false)
}

func (s *Store) prune(ctx context.Context, filters map[string][]string, remove bool) ([]core.PruneReport, error) {
	ctx = context.WithoutCancel(ctx)
	match, err := s.compile(filters, "label", "label!", "until")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vols, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	out := []core.PruneReport{}
	for _, v := range vols {
		ok, err := match(ctx, v)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		ids, err := s.usersOf(ctx, v.Name)
		if err != nil {
			return nil, err
		}
		if len(ids) > 0 {
			continue
		}
		size := dirSize(v.Mountpoint)
		r := core.PruneReport{ID: v.Name, Size: uint64(size)}
		if !remove {
			out = append(out, r)
			continue
		}
		if err := s.removeLocked(ctx, v.Name); err != nil {
			r.Err, r.Size = err.Error(), 0
		}
		out = append(out, r)
	}
	return out, nil
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// optionValue returns an option's value, its key matched case-insensitively.
func optionValue(opts map[string]string, key string) string {
	for k, v := range opts {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}
