package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestNoCgroupMark: a container created without a cgroup is marked before
// conmon runs, so that every later crun call on it (and only on it) gets
// --cgroup-manager disabled, a restarted engine's included; the delete
// removes the mark. runc is refused. /bin/true stands in for crun: the
// calls' options are what is checked, not what crun does with them.
func TestNoCgroupMark(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	r, err := New(Options{Name: "crun", Path: "/bin/true", ConmonPath: "/bin/true", RunRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.markNoCgroup("a"); err != nil {
		t.Fatal(err)
	}
	again, err := New(Options{Name: "crun", Path: "/bin/true", ConmonPath: "/bin/true", RunRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []*Runtime{r, again} {
		if got := rt.globalArgsFor("a"); !slices.Equal(got, []string{"--root", filepath.Join(dir, "crun"), "--cgroup-manager", "disabled"}) {
			t.Fatalf("options for the container without a cgroup: %v", got)
		}
		if got := rt.globalArgsFor("b"); !slices.Equal(got, []string{"--root", filepath.Join(dir, "crun")}) {
			t.Fatalf("options for another container: %v", got)
		}
	}
	if err := r.Delete(ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	if r.NoCgroup("a") {
		t.Fatal("the delete left the mark")
	}
	if _, err := os.Stat(filepath.Join(dir, "nocgroup", "a")); !os.IsNotExist(err) {
		t.Fatalf("mark file after the delete: %v", err)
	}
	runc, err := New(Options{Name: "runc", Path: "/bin/true", ConmonPath: "/bin/true", RunRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := runc.markNoCgroup("a"); err == nil || runc.NoCgroup("a") {
		t.Fatalf("runc marked a container without a cgroup: %v", err)
	}
}
