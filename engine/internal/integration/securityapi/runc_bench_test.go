package securityapi

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
)

// BenchmarkSeccompRuncCPU: where the filter's cost is. `runc run` of
// /bin/true (static busybox root filesystem, no network namespace
// change) with the filters a container could get, alternated, reporting
// the median CPU time of runc and its init (rusage of the waited-for
// process tree: waiting for a CPU on a loaded machine does not count) and
// the median wall time:
//   - none: seccomp=unconfined;
//   - default: what the engine applies (Docker's profile; x32 left out
//     where the kernel has no x32 ABI, see seccomp.Apply);
//   - docker: Docker's profile exactly as dockerd and Podman resolve it
//     (x86_64, i386 and x32);
//   - native: x86_64 only, which a client can ask for with a profile file
//     (--security-opt seccomp=FILE): i386 programs are then killed at their
//     first system call.
func BenchmarkSeccompRuncCPU(b *testing.B) {
	benchtest.Require(b)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		b.Skip("needs a static busybox (busybox-static)")
	}
	dir := b.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin", "true"), data, 0o755); err != nil {
		b.Fatal(err)
	}
	base := runcSpec(b, dir, rootfs)
	variants := []struct {
		name   string
		filter func(*specs.Spec)
	}{
		{"none", func(s *specs.Spec) {}},
		{"default", func(s *specs.Spec) {
			if err := seccomp.Apply(s, nil); err != nil {
				b.Fatal(err)
			}
		}},
		{"docker", func(s *specs.Spec) {
			if err := seccomp.Apply(s, seccomp.DefaultJSON()); err != nil {
				b.Fatal(err)
			}
		}},
		{"native", func(s *specs.Spec) {
			if err := seccomp.Apply(s, seccomp.DefaultJSON()); err != nil {
				b.Fatal(err)
			}
			s.Linux.Seccomp.Architectures = []specs.Arch{specs.ArchX86_64}
		}},
	}
	bundles := make([]string, len(variants))
	for i, v := range variants {
		var s specs.Spec
		if err := json.Unmarshal(base, &s); err != nil {
			b.Fatal(err)
		}
		v.filter(&s)
		bundles[i] = filepath.Join(dir, v.name)
		out, err := json.Marshal(&s)
		if err == nil {
			err = os.MkdirAll(bundles[i], 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(bundles[i], "config.json"), out, 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
		if s.Linux.Seccomp != nil {
			b.Logf("%s: architectures %v, %d rules", v.name, s.Linux.Seccomp.Architectures, len(s.Linux.Seccomp.Syscalls))
		}
	}
	state := filepath.Join(dir, "state")
	n := 0
	run := func(bundle string) (cpu, wall time.Duration) {
		n++
		cmd := exec.Command("runc", "--root", state, "run", fmt.Sprintf("berth-bench-%d-%d", os.Getpid(), n))
		cmd.Dir = bundle
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("runc run in %s: %v\n%s", bundle, err, out)
		}
		wall = time.Since(start)
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), wall
	}
	for _, bd := range bundles {
		run(bd)
	}
	const rounds = 30
	cpu := make([][]time.Duration, len(variants))
	wall := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for j, bd := range bundles {
				c, w := run(bd)
				cpu[j], wall[j] = append(cpu[j], c), append(wall[j], w)
			}
		}
	}
	b.StopTimer()
	none := benchtest.Median(cpu[0])
	for j, v := range variants {
		mc, mw := benchtest.Median(cpu[j]), benchtest.Median(wall[j])
		b.ReportMetric(float64(mc.Microseconds())/1000, v.name+"-cpu-ms")
		fmt.Printf("runc run /bin/true, seccomp %-8s median CPU %6.1f ms (added %5.1f ms), median wall %6.1f ms, %d runs\n",
			v.name, float64(mc.Microseconds())/1000, float64((mc-none).Microseconds())/1000, float64(mw.Microseconds())/1000, len(cpu[j]))
	}
}

// runcSpec is `runc spec`'s config for rootfs running /bin/true, with
// Podman's default capabilities (the profile's rules follow them).
func runcSpec(b *testing.B, dir, rootfs string) []byte {
	cmd := exec.Command("runc", "spec", "--bundle", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("runc spec: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		b.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		b.Fatal(err)
	}
	s.Root = &specs.Root{Path: rootfs, Readonly: true}
	s.Process.Terminal = false
	s.Process.Args = []string{"/bin/true"}
	caps := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_NET_BIND_SERVICE",
		"CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT"}
	s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: slices.Clone(caps), Permitted: slices.Clone(caps)}
	out, err := json.Marshal(&s)
	if err != nil {
		b.Fatal(err)
	}
	return out
}
