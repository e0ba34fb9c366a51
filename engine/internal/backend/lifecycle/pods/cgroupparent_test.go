package pods

import (
	"errors"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/core"
)

// TestPodCgroupParentPerManager: a pod's cgroup parent is a clean absolute
// path under cgroupfs and a slice name under systemd (400 naming
// cgroup_parent otherwise); the pod's own cgroup is a directory below the
// path, or a slice below the slice.
func TestPodCgroupParentPerManager(t *testing.T) {
	fs := &Manager{o: Options{CgroupManager: cgroups.ManagerCgroupfs}}
	sd := &Manager{o: Options{CgroupManager: cgroups.ManagerSystemd}}
	for _, c := range []struct {
		m      *Manager
		parent string
		ok     bool
	}{
		{fs, "/mine", true}, {fs, "x/y", false}, {fs, "/", false}, {fs, "/a/../b", false}, {fs, "mine.slice", false},
		{sd, "mine.slice", true}, {sd, "machine-mine.slice", true}, {sd, "/mine", false}, {sd, "mine", false}, {sd, "a--b.slice", false},
	} {
		err := c.m.checkCgroupParent(c.parent)
		var fe *core.FieldError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s %q refused: %v", c.m.o.CgroupManager, c.parent, err)
		case !c.ok && (!errors.As(err, &fe) || fe.Field != "cgroup_parent"):
			t.Errorf("%s %q: %v, want a 400 naming cgroup_parent", c.m.o.CgroupManager, c.parent, err)
		}
	}
	pod := core.Pod{ID: "p1", CgroupParent: "/berth"}
	if err := fs.placeCgroup(&pod); err != nil || pod.CgroupPath != "/berth/berth-pod-p1" || pod.CgroupSlice != "" || podMembersParent(pod) != "/berth/berth-pod-p1" {
		t.Fatalf("cgroupfs pod %+v %v", pod, err)
	}
	pod = core.Pod{ID: "p1", CgroupParent: "berth.slice"}
	if err := sd.placeCgroup(&pod); err != nil || pod.CgroupPath != "/berth.slice/berth-berth_pod_p1.slice" || pod.CgroupSlice != "berth-berth_pod_p1.slice" || podMembersParent(pod) != pod.CgroupSlice {
		t.Fatalf("systemd pod %+v %v", pod, err)
	}
}
