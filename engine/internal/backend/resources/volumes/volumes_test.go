package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/filtertest"
	"github.com/berth-project/berth/engine/internal/testsupport/statetest"
)

// users is a container backend stand-in: which containers use which volume.
type users struct {
	using   map[string][]string
	removed []string
	// timeouts are the stop timeouts removals within one were given.
	timeouts []uint
}

func (u *users) ContainersUsingVolume(_ context.Context, name string) ([]string, error) {
	return slices.Clone(u.using[name]), nil
}

func (u *users) RemoveContainer(_ context.Context, id string) error {
	u.removed = append(u.removed, id)
	for name, ids := range u.using {
		u.using[name] = slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == id })
	}
	return nil
}

func (u *users) RemoveContainerWithin(ctx context.Context, id string, timeout uint) error {
	u.timeouts = append(u.timeouts, timeout)
	return u.RemoveContainer(ctx, id)
}

func open(t *testing.T, dir string) (*Store, *state.DB) {
	t.Helper()
	return statetest.OpenStore(t, dir, func(ctx context.Context, db *state.DB) (*Store, error) {
		return Open(ctx, db, filepath.Join(dir, "volumes"), nil)
	})
}

func TestStorePersistsAndRepairs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, db := open(t, dir)
	v, err := s.Create(ctx, core.VolumeCreateOptions{Name: "keep", Labels: map[string]string{"a": "1"}, Options: map[string]string{"o": "nocopy"}})
	if err != nil {
		t.Fatal(err)
	}
	if v.NeedsCopyUp || v.Options["o"] != "nocopy" {
		t.Fatalf("nocopy volume: %+v", v)
	}
	if err := os.WriteFile(filepath.Join(v.Mountpoint, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, core.VolumeCreateOptions{Name: "keep"}); !errors.Is(err, core.ErrNameInUse) {
		t.Fatalf("duplicate: %v", err)
	}
	// What a crash between mkdir and the record leaves behind.
	if err := os.MkdirAll(filepath.Join(dir, "volumes", "orphan", "_data"), 0o755); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, db = open(t, dir)
	defer db.Close()
	if _, err := os.Stat(filepath.Join(dir, "volumes", "orphan")); !os.IsNotExist(err) {
		t.Fatalf("orphan directory survived Open: %v", err)
	}
	got, err := s.Inspect(ctx, "keep")
	if err != nil || got.Labels["a"] != "1" || got.Mountpoint != v.Mountpoint {
		t.Fatalf("reopened volume: %+v %v", got, err)
	}
	if data, err := os.ReadFile(filepath.Join(got.Mountpoint, "f")); err != nil || string(data) != "data" {
		t.Fatalf("volume content: %q %v", data, err)
	}
	if _, err := s.Inspect(ctx, "orphan"); !errors.Is(err, core.ErrNoSuchVolume) {
		t.Fatalf("orphan: %v", err)
	}
}

func TestRemoveInUse(t *testing.T) {
	ctx := context.Background()
	s, db := open(t, t.TempDir())
	defer db.Close()
	u := &users{using: map[string][]string{"busy": {"c1", "c2"}}}
	s.SetUsers(u)
	for _, n := range []string{"busy", "idle"} {
		if _, err := s.Create(ctx, core.VolumeCreateOptions{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Remove(ctx, "busy", false); !errors.Is(err, core.ErrVolumeInUse) {
		t.Fatalf("remove in use: %v", err)
	}
	reports, err := s.Prune(ctx, nil)
	if err != nil || len(reports) != 1 || reports[0].ID != "idle" {
		t.Fatalf("prune: %+v %v", reports, err)
	}
	if err := s.Remove(ctx, "busy", true); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.removed, []string{"c1", "c2"}) {
		t.Fatalf("force removed containers %v", u.removed)
	}
	if err := s.Remove(ctx, "busy", false); !errors.Is(err, core.ErrNoSuchVolume) {
		t.Fatalf("second remove: %v", err)
	}
	// podman volume rm -f --time 3: the users are stopped within 3 s.
	u.using["timed"] = []string{"c3"}
	if _, err := s.Create(ctx, core.VolumeCreateOptions{Name: "timed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveForced(ctx, "timed", 3); err != nil || !slices.Equal(u.timeouts, []uint{3}) || !slices.Contains(u.removed, "c3") {
		t.Fatalf("remove within 3 s: %v, timeouts %v, removed %v", err, u.timeouts, u.removed)
	}
}

// FuzzVolumeFilters feeds arbitrary filter maps (as a client's JSON
// "filters" parameter) to the filter compiler: it must reject or accept
// without panicking, and a compiled filter must run.
func FuzzVolumeFilters(f *testing.F) {
	for _, seed := range []string{
		`{"name":["data"]}`, `{"label":["a=b","c"]}`, `{"label!":["x"]}`, `{"driver":["local"]}`,
		`{"dangling":["true"]}`, `{"dangling":["true","false"]}`, `{"anonymous":["1"]}`,
		`{"until":["10m"]}`, `{"until":["2024-01-02T03:04:05Z"]}`, `{"until":["1700000000.5"]}`,
		`{"name":["(["]}`, `{"colour":["red"]}`, `{}`,
	} {
		f.Add(seed)
	}
	s := &Store{}
	vol := &core.Volume{Name: "data", Driver: Driver, Labels: map[string]string{"a": "b"}}
	filtertest.Fuzz(f, vol, func(filters map[string][]string) (listfilter.Test[*core.Volume], error) {
		return s.compile(filters, "name", "label", "label!", "driver", "dangling", "anonymous", "until")
	})
}

// TestOpenRemovesImportStaging: an import cut short by a crash leaves its
// staging directory beside the volume's data; the next Open deletes it and
// leaves the data alone.
func TestOpenRemovesImportStaging(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, db := open(t, dir)
	v, err := s.Create(ctx, core.VolumeCreateOptions{Name: "vol"})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(v.Mountpoint, "f"), []byte("data"), 0o644)
	staging := filepath.Join(dir, "volumes", "vol", importPrefix+"123")
	os.MkdirAll(filepath.Join(staging, "half"), 0o755)
	db.Close()
	_, db = open(t, dir)
	defer db.Close()
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Fatalf("staging after Open: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(v.Mountpoint, "f")); err != nil || string(got) != "data" {
		t.Fatalf("data after Open: %q %v", got, err)
	}
}

// TestDirectoryOwner: o=uid=N,gid=N without a type makes a plain directory
// owned by N (Podman's local driver), shown in inspect's UID and GID; other
// data options without a type, and a bad number, are refused naming Options
// with nothing created.
func TestDirectoryOwner(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, t.TempDir())
	v, err := s.Create(ctx, core.VolumeCreateOptions{Name: "owned", Options: map[string]string{"o": "uid=1234,gid=2345"}})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(v.Mountpoint)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234 || st.Gid != 2345 || v.UID != 1234 || v.GID != 2345 || !v.NeedsCopyUp {
		t.Fatalf("owner %d:%d, volume %+v", st.Uid, st.Gid, v)
	}
	if err := s.Mount(ctx, "owned"); err != nil || mounted(v.Mountpoint) {
		t.Fatalf("a plain directory was mounted (%v)", err)
	}
	for _, o := range []string{"uid=x", "uid=-1", "uid=1,size=1m", "gid=1,nodev"} {
		var fe *core.FieldError
		if _, err := s.Create(ctx, core.VolumeCreateOptions{Name: "bad", Options: map[string]string{"o": o}}); !errors.As(err, &fe) || fe.Field != "Options" {
			t.Errorf("o=%s: %v, want a 400 naming Options", o, err)
		}
	}
	if _, err := s.Inspect(ctx, "bad"); !errors.Is(err, core.ErrNoSuchVolume) {
		t.Errorf("a refused create left a volume: %v", err)
	}
}
