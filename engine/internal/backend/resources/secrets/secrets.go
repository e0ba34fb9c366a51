// Package secrets implements core.Secrets with Podman's "file" driver: a
// secret's metadata is a row of the state database, its data a file of its
// own, DIR/ID, readable by root only (the directory 0700, the files 0600).
//
// Crash safety: create writes the data file (temporary file, fsync, rename,
// fsync of the directory) before the row; remove deletes the row before the
// file. Open deletes data files without a row and temporary files, which is
// everything a kill -9 between two steps can leave. A secret's data never
// appears in an error, a log line or an event.
package secrets

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
	"strings"
	"sync"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/durable"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// Driver is the only secret driver the engine has.
const Driver = "file"

// MaxSize is the largest secret, as Podman limits it (data must be
// non-empty and shorter than 512000 bytes).
const MaxSize = 512000 - 1

// idLength is the length of a secret ID in hex digits, as Podman's.
const idLength = 25

// tempPrefix marks data files being written.
const tempPrefix = ".tmp-"

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Store is the engine's secret backend.
type Store struct {
	db     *state.DB
	dir    string
	logger *slog.Logger

	// mu serialises changes so that a name check and its write cannot
	// interleave with another change.
	mu     sync.Mutex
	users  core.SecretUsers
	events core.EventSink
}

var _ core.Secrets = (*Store)(nil)

// Open returns the secret store keeping data files in dir (created 0700)
// and removes what a crash left behind: data files without a record and
// temporary files.
func Open(ctx context.Context, db *state.DB, dir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	s := &Store{db: db, dir: dir, logger: logger, events: core.NoEvents}
	recs, err := db.Secrets().List(ctx)
	if err != nil {
		return nil, err
	}
	_, leftovers, err := durable.Sweep(dir, recs, func(r state.SecretRecord) string { return r.ID })
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	for _, name := range leftovers {
		logger.Info("deleting secret data file without record", "file", name)
		os.Remove(filepath.Join(dir, name))
	}
	return s, nil
}

// SetUsers connects the container backend, which knows which containers use
// which secret. Without it every secret counts as unused.
func (s *Store) SetUsers(u core.SecretUsers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users = u
}

// SetEventSink makes the store report secret create and remove events.
func (s *Store) SetEventSink(sink core.EventSink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = sink
}

// Create stores a secret. The name must be free unless opts.Replace (the
// existing secret keeps its ID and gets the new data and labels) or
// opts.Ignore (the existing secret's ID is answered, nothing changes).
func (s *Store) Create(ctx context.Context, opts core.SecretCreateOptions, data []byte) (string, error) {
	ctx = context.WithoutCancel(ctx)
	if opts.Name == "" {
		return "", core.InvalidArgument("name", errors.New("a secret needs a name"))
	}
	if len(opts.Name) > 253 || !validName.MatchString(opts.Name) {
		return "", core.InvalidArgument("name", fmt.Errorf("%q must match [a-zA-Z0-9][a-zA-Z0-9_.-]* (at most 253 characters)", opts.Name))
	}
	switch opts.Driver {
	case "", Driver:
	default:
		return "", core.InvalidArgument("driver", fmt.Errorf("%q is not a supported secret driver (file)", opts.Driver))
	}
	for k := range opts.DriverOpts {
		return "", core.InvalidArgument("driveropts", fmt.Errorf("the file driver takes no option %q here", k))
	}
	if len(data) == 0 || len(data) > MaxSize {
		return "", core.InvalidArgument("body", fmt.Errorf("secret data must be larger than 0 and less than %d bytes", MaxSize+1))
	}
	if opts.Replace && opts.Ignore {
		return "", core.InvalidArgument("ignore", errors.New("replace and ignore cannot be used together"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := s.load(ctx)
	if err != nil {
		return "", err
	}
	now := time.Now().UTC()
	for _, old := range all {
		if old.Spec.Name != opts.Name {
			continue
		}
		switch {
		case opts.Ignore:
			return old.ID, nil
		case !opts.Replace:
			return "", fmt.Errorf("%s: %w", opts.Name, core.ErrSecretExists)
		}
		if err := s.writeData(old.ID, data); err != nil {
			return "", err
		}
		old.UpdatedAt = now
		old.Spec.Labels = labelsOrEmpty(opts.Labels)
		if err := s.save(ctx, old, false); err != nil {
			return "", err
		}
		s.events.Emit(ctx, core.Event{Type: core.EventSecret, Action: "create", ID: old.ID, Name: old.Spec.Name})
		return old.ID, nil
	}
	sec := &core.Secret{
		ID:        newID(),
		CreatedAt: now,
		UpdatedAt: now,
		Spec: core.SecretSpec{
			Name:   opts.Name,
			Driver: core.SecretDriver{Name: Driver},
			Labels: labelsOrEmpty(opts.Labels),
		},
	}
	if err := s.writeData(sec.ID, data); err != nil {
		return "", err
	}
	if err := s.save(ctx, sec, true); err != nil {
		os.Remove(s.dataPath(sec.ID))
		return "", err
	}
	s.events.Emit(ctx, core.Event{Type: core.EventSecret, Action: "create", ID: sec.ID, Name: sec.Spec.Name})
	return sec.ID, nil
}

// Inspect returns a secret by name, full ID or unique ID prefix.
func (s *Store) Inspect(ctx context.Context, nameOrID string, showData bool) (*core.Secret, error) {
	all, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	sec, err := find(all, nameOrID)
	if err != nil {
		return nil, err
	}
	s.present(sec)
	if showData {
		data, err := s.readData(sec)
		if err != nil {
			return nil, err
		}
		sec.SecretData = string(data)
	}
	return sec, nil
}

// Data returns a secret and its data, for the container backend.
func (s *Store) Data(ctx context.Context, nameOrID string) (*core.Secret, []byte, error) {
	all, err := s.load(ctx)
	if err != nil {
		return nil, nil, err
	}
	sec, err := find(all, nameOrID)
	if err != nil {
		return nil, nil, err
	}
	data, err := s.readData(sec)
	if err != nil {
		return nil, nil, err
	}
	return sec, data, nil
}

// List returns the secrets matching filters, oldest first.
func (s *Store) List(ctx context.Context, filters map[string][]string) ([]*core.Secret, error) {
	match, err := compileFilters(filters)
	if err != nil {
		return nil, err
	}
	all, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	out, err := match.Keep(ctx, all)
	for _, sec := range out {
		s.present(sec)
	}
	return out, err
}

// Remove removes a secret that no container uses.
func (s *Store) Remove(ctx context.Context, nameOrID string) error {
	return s.remove(ctx, func(all []*core.Secret) ([]*core.Secret, error) {
		sec, err := find(all, nameOrID)
		if err != nil {
			return nil, err
		}
		return []*core.Secret{sec}, nil
	})
}

// RemoveAll removes every secret, or none when a container uses one.
func (s *Store) RemoveAll(ctx context.Context) error {
	return s.remove(ctx, func(all []*core.Secret) ([]*core.Secret, error) { return all, nil })
}

// remove removes, under the store's lock, the secrets pick chooses from all
// of them (a client's leaving does not stop it halfway).
func (s *Store) remove(ctx context.Context, pick func(all []*core.Secret) ([]*core.Secret, error)) error {
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := s.load(ctx)
	if err != nil {
		return err
	}
	secs, err := pick(all)
	if err != nil {
		return err
	}
	return s.removeLocked(ctx, secs)
}

func (s *Store) removeLocked(ctx context.Context, secs []*core.Secret) error {
	ids := make([]string, 0, len(secs))
	for _, sec := range secs {
		if s.users != nil {
			users, err := s.users.ContainersUsingSecret(ctx, sec.ID)
			if err != nil {
				return err
			}
			if len(users) > 0 {
				return fmt.Errorf("secret %s is used by container %s: %w", sec.Spec.Name, shortID(users[0]), core.ErrSecretInUse)
			}
		}
		ids = append(ids, sec.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := s.db.RemoveSecrets(ctx, ids...); err != nil {
		return err
	}
	for _, sec := range secs {
		if err := os.Remove(s.dataPath(sec.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.logger.Warn("removing secret data file", "secret", sec.ID, "err", err)
		}
		s.events.Emit(ctx, core.Event{Type: core.EventSecret, Action: "remove", ID: sec.ID, Name: sec.Spec.Name})
	}
	return durable.SyncDir(s.dir)
}

// load reads every secret's metadata from the database.
func (s *Store) load(ctx context.Context) ([]*core.Secret, error) {
	recs, err := s.db.Secrets().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*core.Secret, 0, len(recs))
	for _, r := range recs {
		var sec core.Secret
		if err := json.Unmarshal(r.Data, &sec); err != nil {
			return nil, fmt.Errorf("secret %s: decoding its record: %w", r.ID, err)
		}
		out = append(out, &sec)
	}
	return out, nil
}

// save writes a secret's metadata (insert when isNew, else update).
func (s *Store) save(ctx context.Context, sec *core.Secret, isNew bool) error {
	stored := *sec
	stored.SecretData = ""
	stored.Spec.Driver.Options = nil
	data, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	rec := state.SecretRecord{ID: sec.ID, Name: sec.Spec.Name, Created: sec.CreatedAt, Data: data}
	if !isNew {
		return s.db.Secrets().Update(ctx, rec)
	}
	if err := s.db.Secrets().Add(ctx, rec); err != nil {
		if errors.Is(err, state.ErrDuplicate) {
			return fmt.Errorf("%s: %w", sec.Spec.Name, core.ErrSecretExists)
		}
		return err
	}
	return nil
}

// present fills what clients see but is not stored: the driver's options.
func (s *Store) present(sec *core.Secret) {
	sec.Spec.Driver.Options = map[string]string{"path": s.dir}
}

func (s *Store) dataPath(id string) string { return filepath.Join(s.dir, id) }

// writeData replaces a secret's data file atomically.
func (s *Store) writeData(id string, data []byte) error {
	if err := durable.WriteFile(s.dataPath(id), data, 0o600, tempPrefix+id+"-"); err != nil {
		return fmt.Errorf("secret %s: %w", id, err)
	}
	return nil
}

func (s *Store) readData(sec *core.Secret) ([]byte, error) {
	data, err := os.ReadFile(s.dataPath(sec.ID))
	if err != nil {
		return nil, fmt.Errorf("secret %s: reading its data: %w", sec.Spec.Name, errors.Unwrap(err))
	}
	return data, nil
}

// find resolves a name, a full ID or a unique ID prefix.
func find(all []*core.Secret, nameOrID string) (*core.Secret, error) {
	if nameOrID == "" {
		return nil, core.InvalidArgument("name", errors.New("a secret name or ID is required"))
	}
	for _, sec := range all {
		if sec.Spec.Name == nameOrID || sec.ID == nameOrID {
			return sec, nil
		}
	}
	var hits []*core.Secret
	for _, sec := range all {
		if strings.HasPrefix(sec.ID, nameOrID) {
			hits = append(hits, sec)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return nil, core.NoSuchSecret(nameOrID)
	default:
		return nil, fmt.Errorf("secret %q: %w", nameOrID, core.ErrAmbiguous)
	}
}

func labelsOrEmpty(labels map[string]string) map[string]string {
	if labels == nil {
		return map[string]string{}
	}
	return labels
}

func newID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)[:idLength]
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
