package cgroups

import (
	"bytes"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestSliceDir(t *testing.T) {
	for name, want := range map[string]string{
		"berth.slice":               "/berth.slice",
		"machine-berth.slice":       "/machine.slice/machine-berth.slice",
		"a-b-c.slice":               "/a.slice/a-b.slice/a-b-c.slice",
		"-.slice":                   "/",
		"berth-berth_pod_abc.slice": "/berth.slice/berth-berth_pod_abc.slice",
		"system-getty\\x2d1.slice":  "/system.slice/system-getty\\x2d1.slice",
	} {
		if got, err := SliceDir(name); err != nil || got != want {
			t.Errorf("SliceDir(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, bad := range []string{"berth", "/berth", "/berth.slice", ".slice", "a--b.slice", "-a.slice", "a-.slice", "a/b.slice", "a b.slice", "x.scope"} {
		if _, err := SliceDir(bad); err == nil {
			t.Errorf("SliceDir(%q) accepted", bad)
		}
	}
}

func TestContainerPlacement(t *testing.T) {
	p, err := ContainerPlacement(ManagerSystemd, "berth.slice", "abc")
	if err != nil || p.Path != "/berth.slice/berth-abc.scope" || p.OCI != "berth.slice:berth:abc" || !p.Systemd || p.Unit != "berth-abc.scope" {
		t.Fatalf("systemd placement %+v %v", p, err)
	}
	p, err = ContainerPlacement(ManagerSystemd, PodSlice("berth.slice", "p1"), "abc")
	if err != nil || p.Path != "/berth.slice/berth-berth_pod_p1.slice/berth-abc.scope" || p.OCI != "berth-berth_pod_p1.slice:berth:abc" {
		t.Fatalf("pod member placement %+v %v", p, err)
	}
	if _, err := ContainerPlacement(ManagerSystemd, "/berth", "abc"); err == nil {
		t.Fatal("a cgroupfs path was taken for a slice")
	}
	p, err = ContainerPlacement(ManagerCgroupfs, "/berth", "abc")
	if err != nil || p.Path != "/berth/berth-abc" || p.OCI != p.Path || p.Systemd || p.Unit != "" {
		t.Fatalf("cgroupfs placement %+v %v", p, err)
	}
	if got := PodSlice("-.slice", "p"); got != "berth_pod_p.slice" {
		t.Fatalf("pod slice under the root: %q", got)
	}
}

func TestCheckManager(t *testing.T) {
	if err := CheckManager("cgroupfs"); err != nil {
		t.Fatal(err)
	}
	if err := CheckManager("cgroupv3"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("unknown manager: %v", err)
	}
	err := CheckManager("systemd")
	if SystemdBooted() != (err == nil) {
		t.Fatalf("systemd booted %v, CheckManager(systemd) = %v", SystemdBooted(), err)
	}
	if !SystemdBooted() && !strings.Contains(err.Error(), "PID 1") {
		t.Fatalf("reason: %v", err)
	}
	want := ManagerCgroupfs
	if SystemdBooted() && Host().Unified() {
		want = ManagerSystemd
	}
	if got := DefaultManager(); got != want {
		t.Fatalf("default manager %q, want %q", got, want)
	}
}

func TestSliceProperties(t *testing.T) {
	quota, period, shares, mem, swap, pids := int64(50000), uint64(100000), uint64(1024), int64(64<<20), int64(128<<20), int64(32)
	props, err := sliceProperties(&specs.LinuxResources{
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period, Shares: &shares, Cpus: "0-2,9"},
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &swap},
		Pids:   &specs.LinuxPids{Limit: &pids},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, p := range props {
		got[p.Name] = p.Value.Value()
	}
	if got["CPUQuotaPerSecUSec"] != uint64(500000) || got["CPUQuotaPeriodUSec"] != uint64(100000) || got["CPUWeight"] != uint64(39) ||
		got["MemoryMax"] != uint64(64<<20) || got["MemorySwapMax"] != uint64(64<<20) || got["TasksMax"] != uint64(32) {
		t.Fatalf("properties %v", got)
	}
	if m, _ := got["AllowedCPUs"].([]byte); !bytes.Equal(m, []byte{0x07, 0x02}) {
		t.Fatalf("AllowedCPUs %v", got["AllowedCPUs"])
	}
	if _, err := sliceProperties(&specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: "2-1"}}); err == nil || !strings.HasPrefix(err.Error(), "resource_limits.cpu.cpus") {
		t.Fatalf("bad cpu list: %v", err)
	}
}
