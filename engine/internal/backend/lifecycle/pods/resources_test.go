package pods

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestNormalizeResources: what podman pod create 4.3.1 sends for its
// resource flags is kept (and cpu_period/cpu_quota folded in), the empty
// {"cpu":{}} is no limit, and every limit a pod cannot take is a 400 naming it.
func TestNormalizeResources(t *testing.T) {
	no := false
	cases := []struct {
		name   string
		spec   core.PodSpec
		field  string
		writes string
	}{
		{name: "none", spec: core.PodSpec{}},
		{name: "empty cpu", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{}}`)}},
		{name: "podman --cpus 1 --memory 64m --cpu-shares 512 --cpuset-cpus 0 --cpuset-mems 0",
			spec: core.PodSpec{CPUPeriod: 100000, CPUQuota: 100000, ResourceLimits: mustResources(t,
				`{"memory":{"limit":67108864,"swap":134217728},"cpu":{"shares":512,"quota":100000,"period":100000,"cpus":"0","mems":"0"}}`)},
			writes: "cpuset/cpuset.cpus=0 cpuset/cpuset.mems=0 cpu/cpu.shares=512 cpu/cpu.cfs_period_us=100000 cpu/cpu.cfs_quota_us=100000 memory/memory.limit_in_bytes=67108864 memory/memory.memsw.limit_in_bytes=134217728"},
		{name: "cpus from the top level", spec: core.PodSpec{CPUPeriod: 100000, CPUQuota: 50000},
			writes: "cpu/cpu.cfs_period_us=100000 cpu/cpu.cfs_quota_us=50000"},
		{name: "pids", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"pids":{"limit":20}}`)}, writes: "pids/pids.max=20"},
		{name: "pids unlimited", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"pids":{"limit":-1}}`)}, writes: "pids/pids.max=max"},
		{name: "swap unlimited", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"memory":{"limit":8388608,"swap":-1}}`)},
			writes: "memory/memory.limit_in_bytes=8388608 memory/memory.memsw.limit_in_bytes=-1"},
		{name: "memory too small", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"memory":{"limit":1024}}`)}, field: "resource_limits.memory.limit"},
		{name: "swap below memory", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"memory":{"limit":67108864,"swap":8388608}}`)}, field: "resource_limits.memory.swap"},
		{name: "swap alone", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"memory":{"swap":67108864}}`)}, field: "resource_limits.memory.swap"},
		{name: "reservation", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"memory":{"reservation":67108864}}`)}, field: "resource_limits.memory.reservation"},
		{name: "shares too small", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{"shares":1}}`)}, field: "resource_limits.cpu.shares"},
		{name: "period too long", spec: core.PodSpec{CPUPeriod: 2000000}, field: "resource_limits.cpu.period"},
		{name: "quota too small", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{"quota":10}}`)}, field: "resource_limits.cpu.quota"},
		{name: "realtime", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{"realtimeRuntime":10}}`)}, field: "resource_limits.cpu.realtimeRuntime"},
		{name: "bad cpuset", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{"cpus":"0-x"}}`)}, field: "resource_limits.cpu.cpus"},
		{name: "reversed mems", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{"mems":"3-1"}}`)}, field: "resource_limits.cpu.mems"},
		{name: "pids below -1", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"pids":{"limit":-5}}`)}, field: "resource_limits.pids.limit"},
		{name: "devices", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"devices":[{"allow":true}]}`)}, field: "resource_limits.devices"},
		{name: "device read bps", spec: core.PodSpec{ThrottleReadBpsDevice: []byte(`{"/dev/sda":{"rate":1}}`)}, field: "throttleReadBpsDevice"},
		{name: "limits without the pod's cgroup", spec: core.PodSpec{ShareParent: &no, ResourceLimits: mustResources(t, `{"pids":{"limit":20}}`)}, field: "share_parent"},
		{name: "no limits without the pod's cgroup", spec: core.PodSpec{ShareParent: &no, ResourceLimits: mustResources(t, `{"cpu":{}}`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.spec
			err := normalizeResources(&s)
			if c.field != "" {
				var fe *core.FieldError
				if !errors.As(err, &fe) || fe.Field != c.field {
					t.Fatalf("got %v, want a 400 naming %s", err, c.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			var got []string
			for _, w := range limitWrites(s.ResourceLimits, false) {
				got = append(got, w.controller+"/"+w.file+"="+w.value)
			}
			if strings.Join(got, " ") != c.writes {
				t.Fatalf("cgroup v1 writes:\n got %s\nwant %s", strings.Join(got, " "), c.writes)
			}
			if c.writes == "" && s.ResourceLimits != nil {
				t.Fatalf("no limit, yet resource_limits kept: %+v", s.ResourceLimits)
			}
		})
	}
}

// TestLimitWritesUnified: the same limits on the unified hierarchy (v2).
func TestLimitWritesUnified(t *testing.T) {
	r := mustResources(t, `{"memory":{"limit":67108864,"swap":134217728},"cpu":{"shares":1024,"quota":50000,"period":100000,"cpus":"0-1"},"pids":{"limit":-1}}`)
	var got []string
	for _, w := range limitWrites(r, true) {
		got = append(got, w.file+"="+w.value)
	}
	want := "cpuset.cpus=0-1 cpu.weight=39 cpu.max=50000 100000 memory.max=67108864 memory.swap.max=67108864 pids.max=max"
	if strings.Join(got, " ") != want {
		t.Fatalf("unified writes:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// FuzzCheckCPUSet: the cpuset list check never panics, and what it accepts
// is numbers and ascending ranges only.
func FuzzCheckCPUSet(f *testing.F) {
	f.Add("0-3,5")
	f.Fuzz(func(t *testing.T, list string) {
		if checkCPUSet(list) != nil {
			return
		}
		if strings.Trim(list, "0123456789,-") != "" || list == "" {
			t.Fatalf("accepted %q", list)
		}
	})
}
