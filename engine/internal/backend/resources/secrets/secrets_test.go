package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/filtertest"
	"github.com/berth-project/berth/engine/internal/testsupport/statetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// users is a container backend stand-in: which containers use which secret.
type users struct{ using map[string][]string }

func (u *users) ContainersUsingSecret(_ context.Context, id string) ([]string, error) {
	return slices.Clone(u.using[id]), nil
}

// recorder collects the events the store emits.
type recorder struct {
	mu     sync.Mutex
	events []core.Event
}

func (r *recorder) Emit(_ context.Context, e core.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func open(t *testing.T, dir string) (*Store, *state.DB) {
	t.Helper()
	return statetest.OpenStore(t, dir, func(ctx context.Context, db *state.DB) (*Store, error) {
		return Open(ctx, db, filepath.Join(dir, "secrets"), nil)
	})
}

func TestCreateInspectReplaceRemove(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	ctx := context.Background()
	dir := t.TempDir()
	s, db := open(t, dir)
	defer db.Close()
	rec := &recorder{}
	s.SetEventSink(rec)
	u := &users{using: map[string][]string{}}
	s.SetUsers(u)

	id, err := s.Create(ctx, core.SecretCreateOptions{Name: "db-pass", Labels: map[string]string{"app": "web"}}, []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != idLength {
		t.Fatalf("id %q", id)
	}
	fi, err := os.Stat(filepath.Join(dir, "secrets"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("secrets dir: %v %v", fi, err)
	}
	fi, err = os.Stat(filepath.Join(dir, "secrets", id))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("data file: %v %v", fi, err)
	}
	sec, err := s.Inspect(ctx, "db-pass", false)
	if err != nil || sec.ID != id || sec.SecretData != "" || sec.Spec.Driver.Name != "file" || sec.Spec.Labels["app"] != "web" {
		t.Fatalf("inspect: %+v %v", sec, err)
	}
	if raw, _ := json.Marshal(sec); bytes.Contains(raw, []byte("hunter2")) || bytes.Contains(raw, []byte("SecretData")) {
		t.Fatalf("inspect without showsecret carries the data: %s", raw)
	}
	if sec, err := s.Inspect(ctx, id[:6], true); err != nil || sec.SecretData != "hunter2" {
		t.Fatalf("inspect by prefix with data: %+v %v", sec, err)
	}

	_, err = s.Create(ctx, core.SecretCreateOptions{Name: "db-pass"}, []byte("other"))
	if !errors.Is(err, core.ErrNameInUse) || strings.Contains(err.Error(), "other") {
		t.Fatalf("taken name: %v", err)
	}
	if got, err := s.Create(ctx, core.SecretCreateOptions{Name: "db-pass", Ignore: true}, []byte("other")); err != nil || got != id {
		t.Fatalf("ignore: %q %v", got, err)
	}
	if got, err := s.Create(ctx, core.SecretCreateOptions{Name: "db-pass", Replace: true}, []byte("s3cret")); err != nil || got != id {
		t.Fatalf("replace: %q %v", got, err)
	}
	if sec, err := s.Inspect(ctx, id, true); err != nil || sec.SecretData != "s3cret" || !sec.UpdatedAt.After(sec.CreatedAt) || len(sec.Spec.Labels) != 0 {
		t.Fatalf("after replace: %+v %v", sec, err)
	}

	u.using[id] = []string{"c0ffee0123456789"}
	if err := s.Remove(ctx, "db-pass"); !errors.Is(err, core.ErrSecretInUse) {
		t.Fatalf("remove in use: %v", err)
	}
	if err := s.RemoveAll(ctx); !errors.Is(err, core.ErrSecretInUse) {
		t.Fatalf("remove all with one in use: %v", err)
	}
	delete(u.using, id)
	if err := s.Remove(ctx, "db-pass"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inspect(ctx, "db-pass", false); !errors.Is(err, core.ErrNoSuchSecret) {
		t.Fatalf("inspect removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "secrets", id)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data file after remove: %v", err)
	}
	var actions []string
	for _, e := range rec.events {
		if e.Type != core.EventSecret || e.ID != id {
			t.Fatalf("event %+v", e)
		}
		actions = append(actions, e.Action)
	}
	if strings.Join(actions, ",") != "create,create,remove" {
		t.Fatalf("events: %v", actions)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	s, db := open(t, t.TempDir())
	defer db.Close()
	big := bytes.Repeat([]byte("x"), MaxSize+1)
	for _, tc := range []struct {
		opts  core.SecretCreateOptions
		data  []byte
		field string
	}{
		{core.SecretCreateOptions{}, []byte("x"), "name"},
		{core.SecretCreateOptions{Name: "-bad"}, []byte("x"), "name"},
		{core.SecretCreateOptions{Name: "a/b"}, []byte("x"), "name"},
		{core.SecretCreateOptions{Name: "ok", Driver: "pass"}, []byte("x"), "driver"},
		{core.SecretCreateOptions{Name: "ok", DriverOpts: map[string]string{"path": "/tmp"}}, []byte("x"), "driveropts"},
		{core.SecretCreateOptions{Name: "ok"}, nil, "body"},
		{core.SecretCreateOptions{Name: "ok"}, big, "body"},
		{core.SecretCreateOptions{Name: "ok", Replace: true, Ignore: true}, []byte("x"), "ignore"},
	} {
		_, err := s.Create(context.Background(), tc.opts, tc.data)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want an invalid %s", tc.opts, err, tc.field)
		}
	}
	if all, _ := s.List(context.Background(), nil); len(all) != 0 {
		t.Fatalf("refused secrets were stored: %v", all)
	}
}

// TestOpenRepairs: what a crash between the steps of a create or a remove
// leaves (a data file without a record, a temporary file) is gone after
// Open, and recorded secrets keep their data.
func TestOpenRepairs(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	ctx := context.Background()
	dir := t.TempDir()
	s, db := open(t, dir)
	id, err := s.Create(ctx, core.SecretCreateOptions{Name: "keep"}, []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, name := range []string{"0123456789abcdef012345678", tempPrefix + "x-1"} {
		if err := os.WriteFile(filepath.Join(dir, "secrets", name), []byte("orphan"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, db = open(t, dir)
	defer db.Close()
	entries, _ := os.ReadDir(filepath.Join(dir, "secrets"))
	if len(entries) != 1 || entries[0].Name() != id {
		t.Fatalf("files after repair: %v", entries)
	}
	if sec, err := s.Inspect(ctx, "keep", true); err != nil || sec.SecretData != "kept" {
		t.Fatalf("kept secret: %+v %v", sec, err)
	}
}

// TestFilters is the table of the list filters' rules: values of one filter
// are alternatives, except label and label! (every value must hold);
// different filters must all match.
func TestFilters(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	ctx := context.Background()
	s, db := open(t, t.TempDir())
	defer db.Close()
	ids := map[string]string{}
	for name, labels := range map[string]map[string]string{
		"alpha": {"tier": "db", "env": "prod"},
		"beta":  {"tier": "web", "env": "prod"},
		"gamma": {"tier": "web"},
	} {
		id, err := s.Create(ctx, core.SecretCreateOptions{Name: name, Labels: labels}, []byte(name))
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	for _, tc := range []struct {
		filters map[string][]string
		want    string
	}{
		{nil, "alpha,beta,gamma"},
		{map[string][]string{"name": {"alpha"}}, "alpha"},
		{map[string][]string{"name": {"alpha", "gamma"}}, "alpha,gamma"},
		{map[string][]string{"name": {"^(al|be)"}}, "alpha,beta"},
		{map[string][]string{"name": {"nope", "beta"}}, "beta"},
		{map[string][]string{"id": {ids["alpha"], ids["beta"][:8]}}, "alpha,beta"},
		{map[string][]string{"label": {"tier=web"}}, "beta,gamma"},
		{map[string][]string{"label": {"tier=web", "env"}}, "beta"},
		{map[string][]string{"label": {"env=prod", "tier=db"}}, "alpha"},
		{map[string][]string{"label!": {"env"}}, "gamma"},
		{map[string][]string{"label!": {"env", "tier=db"}}, "gamma"},
		{map[string][]string{"label!": {"tier=db"}, "label": {"env"}}, "beta"},
		{map[string][]string{"name": {"alpha", "beta"}, "label": {"tier=web"}}, "beta"},
		{map[string][]string{"name": {"alpha", "gamma"}, "id": {ids["gamma"]}}, "gamma"},
	} {
		secs, err := s.List(ctx, tc.filters)
		if err != nil {
			t.Fatalf("%v: %v", tc.filters, err)
		}
		var names []string
		for _, sec := range secs {
			names = append(names, sec.Spec.Name)
		}
		slices.Sort(names)
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.filters, got, tc.want)
		}
	}
	for _, bad := range []map[string][]string{
		{"colour": {"red"}}, {"name": {"(["}}, {"label": {""}},
	} {
		if _, err := s.List(ctx, bad); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%v: %v, want an invalid argument", bad, err)
		}
	}
}

// FuzzSecretFilters feeds arbitrary filter maps (a client's JSON "filters")
// to the filter compiler: it rejects with an invalid argument or compiles a
// predicate that runs, never panics.
func FuzzSecretFilters(f *testing.F) {
	for _, seed := range []string{
		`{"name":["db"]}`, `{"name":["a","b"]}`, `{"id":["abc"]}`, `{"label":["a=b","c"]}`,
		`{"label!":["x"]}`, `{"name":["(["]}`, `{"colour":["red"]}`, `{"label":[""]}`, `{}`,
	} {
		f.Add(seed)
	}
	sec := &core.Secret{ID: "0123456789abcdef012345678", Spec: core.SecretSpec{Name: "db", Labels: map[string]string{"a": "b"}}}
	filtertest.Fuzz(f, sec, compileFilters)
}
