package containers

import (
	"errors"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/core"
)

// TestCheckNoCgroup: cgroups_mode disabled needs crun, and refuses, naming
// the option, whatever needs a cgroup of the container's own (a parent, a
// pod's cgroup or its PID namespace, a cgroup or PID namespace other than
// the host's and a private one, limits, device rules); podman's empty
// resource objects ask for nothing. The cgroup namespace defaults to the
// host's. /bin/true stands in for the runtimes: only their names count.
func TestCheckNoCgroup(t *testing.T) {
	manager := func(name string) *Manager {
		rt, err := runtime.New(runtime.Options{Name: name, Path: "/bin/true", ConmonPath: "/bin/true", RunRoot: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return &Manager{rt: rt}
	}
	crun := manager("crun")
	limit, zero := int64(64<<20), int64(0)
	for _, tc := range []struct {
		name  string
		m     *Manager
		spec  core.ContainerSpec
		pod   *core.PodMembership
		field string
	}{
		{"runc", manager("runc"), core.ContainerSpec{}, nil, "cgroups_mode"},
		{"parent", crun, core.ContainerSpec{CgroupParent: "/x"}, nil, "cgroup_parent"},
		{"pod cgroup", crun, core.ContainerSpec{}, &core.PodMembership{PodName: "p", CgroupParent: "/berth/berth-pod-x"}, "pod"},
		{"pod pid", crun, core.ContainerSpec{}, &core.PodMembership{PodName: "p", InfraID: "i", Shared: []string{core.PodSharePID}}, "pod"},
		{"host pid", crun, core.ContainerSpec{PidNS: core.Namespace{NSMode: "host"}}, nil, "pidns"},
		{"private cgroupns", crun, core.ContainerSpec{CgroupNS: core.Namespace{NSMode: core.CgroupNSPrivate}}, nil, "cgroupns"},
		{"memory", crun, core.ContainerSpec{Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &limit}}}, nil, "resource_limits"},
		{"cpu quota", crun, core.ContainerSpec{CPUQuota: 50000}, nil, "resource_limits"},
		{"device rule", crun, core.ContainerSpec{DeviceCgroupRules: []specs.LinuxDeviceCgroup{{Allow: true, Access: "r"}}}, nil, "device_cgroup_rule"},
		{"empty objects", crun, core.ContainerSpec{Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &zero}, BlockIO: &specs.LinuxBlockIO{}, CPU: &specs.LinuxCPU{}}}, &core.PodMembership{PodName: "p", InfraID: "i", Shared: []string{core.PodShareNet}}, ""},
	} {
		spec := tc.spec
		spec.CgroupsMode = core.CgroupsDisabled
		err := tc.m.resolveCgroups(&spec, tc.pod)
		var fe *core.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field == "" && spec.CgroupNS.NSMode != core.CgroupNSHost:
			t.Errorf("%s: cgroup namespace %q, want the host's", tc.name, spec.CgroupNS.NSMode)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), "disabled")):
			t.Errorf("%s: %v, want a 400 naming %s", tc.name, err, tc.field)
		}
	}
}
