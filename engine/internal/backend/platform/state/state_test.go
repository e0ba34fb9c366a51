package state

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestContainersExecSessionsEventsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := db.AddContainer(ctx, ContainerRecord{ID: "a1", Name: "web", State: "configured", Created: now, Data: []byte(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddContainer(ctx, ContainerRecord{ID: "b2", Name: "web", State: "configured", Created: now, Data: []byte(`{}`)}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate name: got %v, want ErrDuplicate", err)
	}
	if err := db.AddContainer(ctx, ContainerRecord{ID: "a1", Name: "other", State: "configured", Created: now, Data: []byte(`{}`)}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate id: got %v, want ErrDuplicate", err)
	}
	if err := db.UpdateContainer(ctx, ContainerRecord{ID: "a1", Name: "web", State: "running", Data: []byte(`{"x":2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.UpdateContainer(ctx, ContainerRecord{ID: "zz", Name: "n", State: "running", Data: []byte(`{}`)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update missing: got %v", err)
	}
	if err := db.PutExecSession(ctx, ExecSessionRecord{ID: "e1", ContainerID: "a1", Created: now, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutExecSession(ctx, ExecSessionRecord{ID: "e2", ContainerID: "missing", Created: now, Data: []byte(`{}`)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exec for missing container: got %v", err)
	}
	if _, err := db.AppendEvent(ctx, EventRecord{Time: now, Type: "container", Action: "create", ActorID: "a1", Name: "web", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	migs, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v != migs[len(migs)-1].version {
		t.Fatalf("schema version %d, %v; want the last migration's %d", v, err, migs[len(migs)-1].version)
	}
	r, err := db.GetContainer(ctx, "a1")
	if err != nil || r.State != "running" || string(r.Data) != `{"x":2}` || r.Created.UnixNano() != now.UnixNano() {
		t.Fatalf("reopened container: %+v %v", r, err)
	}
	evs, err := db.ListEvents(ctx, now.Add(-time.Second), time.Time{})
	if err != nil || len(evs) != 1 || evs[0].Action != "create" {
		t.Fatalf("events: %+v %v", evs, err)
	}
	if err := db.RemoveContainer(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if s, err := db.ListExecSessions(ctx, ""); err != nil || len(s) != 0 {
		t.Fatalf("exec sessions outlived their container: %+v %v", s, err)
	}
	if _, err := db.GetContainer(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed container: %v", err)
	}
	if n, err := db.PruneEvents(ctx, now.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("prune events: %d %v", n, err)
	}
	if err := db.AddVolume(ctx, VolumeRecord{Name: "v1", Created: now, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddVolume(ctx, VolumeRecord{Name: "v1", Created: now, Data: []byte(`{}`)}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate volume: %v", err)
	}
	if err := db.UpdateVolume(ctx, VolumeRecord{Name: "v1", Data: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if v, err := db.GetVolume(ctx, "v1"); err != nil || string(v.Data) != `{"a":1}` || v.Created.UnixNano() != now.UnixNano() {
		t.Fatalf("volume: %+v %v", v, err)
	}
	if vs, err := db.ListVolumes(ctx); err != nil || len(vs) != 1 {
		t.Fatalf("volumes: %+v %v", vs, err)
	}
	if err := db.RemoveVolume(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := db.RemoveVolume(ctx, "v1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed volume: %v", err)
	}
}

// TestExitCodesOfRemovedContainers: a removal that keeps the exit code
// writes it with the removal; it is read by full ID only and pruned by age.
func TestExitCodesOfRemovedContainers(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	now := time.Now()
	for _, id := range []string{"old", "new", "nocode"} {
		if err := db.AddContainer(ctx, ContainerRecord{ID: id, Name: "n-" + id, State: "exited", Created: now, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RemoveContainerKeepingExit(ctx, "old", &ExitCode{Code: 1, Removed: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := db.RemoveContainerKeepingExit(ctx, "new", &ExitCode{Code: 3, Removed: now}); err != nil {
		t.Fatal(err)
	}
	if err := db.RemoveContainerKeepingExit(ctx, "nocode", nil); err != nil {
		t.Fatal(err)
	}
	if err := db.RemoveContainerKeepingExit(ctx, "new", &ExitCode{Code: 4, Removed: now}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing a removed container again: %v", err)
	}
	if exit, err := db.RemovedExitCode(ctx, "new"); err != nil || exit.Code != 3 || exit.Removed.UnixNano() != now.UnixNano() {
		t.Fatalf("exit code of new: %+v %v", exit, err)
	}
	for _, id := range []string{"nocode", "ne", "n-new"} {
		if _, err := db.RemovedExitCode(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("exit code of %q: %v, want ErrNotFound", id, err)
		}
	}
	if err := db.PruneExitCodes(ctx, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RemovedExitCode(ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned exit code: %v", err)
	}
	if _, err := db.RemovedExitCode(ctx, "new"); err != nil {
		t.Fatalf("recent exit code pruned: %v", err)
	}
}

// openTestDB opens a new state database in the test's directory, closed
// when the test ends.
func openTestDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLeasedAddresses(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	for _, n := range []string{"n1", "n2"} {
		if err := db.Networks().Add(ctx, NamedRecord{ID: n, Name: "net-" + n, Created: time.Now(), Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(network, ctr string, ips ...string) {
		t.Helper()
		if _, err := db.LeaseAddresses(ctx, network, ctr, func(map[string]bool, map[string]string) (Lease, error) { return Lease{IPs: ips}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	lease("n1", "c1", "10.1.0.2")
	lease("n2", "c1", "10.2.0.2", "fd00::2")
	lease("n1", "c2", "10.1.0.3")
	got, err := db.LeasedAddresses(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got["n1"]) != 1 || got["n1"][0] != "10.1.0.2" || len(got["n2"]) != 2 {
		t.Fatalf("LeasedAddresses(c1) = %v", got)
	}
	if err := db.ReleaseAddresses(ctx, "", "c1"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.LeasedAddresses(ctx, "c1"); err != nil || len(got) != 0 {
		t.Fatalf("after the release: %v %v", got, err)
	}
}

// TestLastLeases: the address each pool handed out last is kept with the
// lease, in the same transaction (a failed lease keeps the old one), read
// back by the next lease, and goes with its network.
func TestLastLeases(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	if err := db.Networks().Add(ctx, NamedRecord{ID: "n1", Name: "net-n1", Created: time.Now(), Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var seen map[string]string
	lease := func(ctr string, l Lease) error {
		_, err := db.LeaseAddresses(ctx, "n1", ctr, func(_ map[string]bool, last map[string]string) (Lease, error) {
			seen = last
			return l, nil
		})
		return err
	}
	if err := lease("c1", Lease{IPs: []string{"10.1.0.2", "fd00::2"}, Last: map[string]string{"10.1.0.0/24": "10.1.0.2", "fd00::/64": "fd00::2"}}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Fatalf("first lease saw last leases %v", seen)
	}
	// A static address: no pool's last lease changes.
	if err := lease("c2", Lease{IPs: []string{"10.1.0.9"}}); err != nil {
		t.Fatal(err)
	}
	if seen["10.1.0.0/24"] != "10.1.0.2" || seen["fd00::/64"] != "fd00::2" {
		t.Fatalf("second lease saw %v", seen)
	}
	// A lease that fails (the address taken) leaves the last lease as it was.
	if err := lease("c3", Lease{IPs: []string{"10.1.0.9"}, Last: map[string]string{"10.1.0.0/24": "10.1.0.9"}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate lease: %v", err)
	}
	if err := lease("c3", Lease{IPs: []string{"10.1.0.3"}, Last: map[string]string{"10.1.0.0/24": "10.1.0.3"}}); err != nil {
		t.Fatal(err)
	}
	if seen["10.1.0.0/24"] != "10.1.0.2" {
		t.Fatalf("after a failed lease: %v", seen)
	}
	if err := lease("c4", Lease{}); err != nil || seen["10.1.0.0/24"] != "10.1.0.3" {
		t.Fatalf("after a lease: %v %v", seen, err)
	}
	if err := db.RemoveNetwork(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM network_last_leases`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("last leases after the network's removal: %d %v", n, err)
	}
}
