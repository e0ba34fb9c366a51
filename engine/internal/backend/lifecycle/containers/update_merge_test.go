package containers

import (
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestMergeResources: an update's set fields replace the container's, the
// ones it leaves unset keep their values, and the container's resources
// are not written through.
func TestMergeResources(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	u16 := func(v uint16) *uint16 { return &v }
	cur := &specs.LinuxResources{
		Memory:  &specs.LinuxMemory{Limit: i64(100), Swap: i64(200), Reservation: i64(50)},
		CPU:     &specs.LinuxCPU{Shares: u64(512), Quota: i64(10000), Period: u64(100000), Cpus: "0"},
		BlockIO: &specs.LinuxBlockIO{Weight: u16(300), ThrottleReadBpsDevice: []specs.LinuxThrottleDevice{{Rate: 1}}},
		Unified: map[string]string{"memory.high": "1000"},
	}
	upd := &specs.LinuxResources{
		Memory:  &specs.LinuxMemory{Limit: i64(150)},
		CPU:     &specs.LinuxCPU{Quota: i64(20000), Mems: "0"},
		Pids:    &specs.LinuxPids{Limit: i64(64)},
		BlockIO: &specs.LinuxBlockIO{ThrottleWriteIOPSDevice: []specs.LinuxThrottleDevice{{Rate: 9}}},
		Unified: map[string]string{"io.weight": "50"},
	}
	want := &specs.LinuxResources{
		Memory:  &specs.LinuxMemory{Limit: i64(150), Swap: i64(200), Reservation: i64(50)},
		CPU:     &specs.LinuxCPU{Shares: u64(512), Quota: i64(20000), Period: u64(100000), Cpus: "0", Mems: "0"},
		Pids:    &specs.LinuxPids{Limit: i64(64)},
		BlockIO: &specs.LinuxBlockIO{Weight: u16(300), ThrottleReadBpsDevice: []specs.LinuxThrottleDevice{{Rate: 1}}, ThrottleWriteIOPSDevice: []specs.LinuxThrottleDevice{{Rate: 9}}},
		Unified: map[string]string{"memory.high": "1000", "io.weight": "50"},
	}
	got := mergeResources(cur, upd)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged\n%+v\nwant\n%+v", got, want)
	}
	if *cur.Memory.Limit != 100 || *cur.CPU.Quota != 10000 || cur.CPU.Mems != "" || len(cur.Unified) != 1 || cur.Pids != nil {
		t.Errorf("the container's resources changed: %+v", cur)
	}
	// Nothing to start from: the update alone.
	if got := mergeResources(nil, &specs.LinuxResources{Memory: &specs.LinuxMemory{Swap: i64(7)}}); got.Memory == nil || *got.Memory.Swap != 7 || got.Memory.Limit != nil {
		t.Errorf("merged onto nothing: %+v", got.Memory)
	}
}
