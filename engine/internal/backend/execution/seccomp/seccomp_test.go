package seccomp

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestCheck: a profile is JSON in Docker's format with known actions,
// operators and architectures; the error names the member at fault.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, profile, want string
	}{
		{"default", string(DefaultJSON()), ""},
		{"minimal", `{"defaultAction":"SCMP_ACT_ALLOW"}`, ""},
		{"rules only", `{"syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO"}]}`, "defaultAction"},
		{"not json", `{"defaultAction":`, "not a JSON profile"},
		{"syntax", "{\n  \"defaultAction\": ALLOW\n}", "line 2, column 20"},
		{"wrong type", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":{}}`, "syscalls"},
		{"two values", `{"defaultAction":"SCMP_ACT_ALLOW"} {}`, "more than one"},
		{"empty", `{}`, "defaultAction"},
		{"bad default", `{"defaultAction":"SCMP_ACT_MAYBE"}`, `defaultAction: unknown action "SCMP_ACT_MAYBE"`},
		{"bad action", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["a"],"action":"SCMP_ACT_ALLOW"},{"names":["b"],"action":"X"}]}`, `syscalls[1].action: unknown action "X"`},
		{"bad op", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["a"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"op":"EQ"}]}]}`, "syscalls[0].args[0].op"},
		{"bad index", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["a"],"action":"SCMP_ACT_ERRNO","args":[{"index":6,"op":"SCMP_CMP_EQ"}]}]}`, "syscalls[0].args[0].index"},
		{"bad arch", `{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_Z80"]}`, "architectures[0]"},
		{"bad archmap", `{"defaultAction":"SCMP_ACT_ALLOW","archMap":[{"architecture":"amd64"}]}`, "archMap[0].architecture"},
		{"no names", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"action":"SCMP_ACT_ERRNO"}]}`, "syscalls[0].names"},
		{"name and names", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"name":"a","names":["b"],"action":"SCMP_ACT_ERRNO"}]}`, "syscalls[0].name"},
		{"null rule", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[null]}`, "syscalls[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.profile))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidProfile) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestApplyDefault: the default profile refuses what a container must not
// do and follows the capabilities (mount needs CAP_SYS_ADMIN).
func TestApplyDefault(t *testing.T) {
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}}}, Linux: &specs.Linux{}}
	if err := Apply(spec, nil); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, sc := range spec.Linux.Seccomp.Syscalls {
		if sc.Action == specs.ActAllow && len(sc.Args) == 0 {
			for _, n := range sc.Names {
				allowed[n] = true
			}
		}
	}
	if spec.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Errorf("default action %s, want SCMP_ACT_ERRNO", spec.Linux.Seccomp.DefaultAction)
	}
	for _, n := range []string{"read", "write", "execve", "openat"} {
		if !allowed[n] {
			t.Errorf("%s is not allowed", n)
		}
	}
	for _, n := range []string{"keyctl", "add_key", "init_module", "finit_module", "reboot", "mount", "unshare", "setns", "kexec_load", "settimeofday", "bpf"} {
		if allowed[n] {
			t.Errorf("%s is allowed without the capability that needs it", n)
		}
	}
	spec.Process.Capabilities.Bounding = append(spec.Process.Capabilities.Bounding, "CAP_SYS_TIME", "CAP_SYS_ADMIN")
	if err := Apply(spec, nil); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sc := range spec.Linux.Seccomp.Syscalls {
		for _, n := range sc.Names {
			found[n] = found[n] || sc.Action == specs.ActAllow
		}
	}
	for _, n := range []string{"settimeofday", "mount", "setns"} {
		if !found[n] {
			t.Errorf("%s is refused with the capability that allows it", n)
		}
	}
}

// FuzzCheck: any input is checked without a panic, and what Check accepts
// Apply can turn into a filter.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO","args":[{"index":1,"value":2,"op":"SCMP_CMP_EQ"}]}]}`))
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ERRNO","archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":["SCMP_ARCH_X86"]}]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if Check(data) != nil {
			return
		}
		spec := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
		// Apply may still refuse what moby's loader refuses (a rule's
		// kernel version it cannot parse): an error, never a panic.
		_ = Apply(spec, data)
	})
}

// TestDefaultLeavesOutX32WithoutTheABI: the default filter lists x32 exactly
// where the kernel runs x32 system calls (the kernel's configuration, where
// it publishes one, must agree with the probe), and i386 always.
func TestDefaultLeavesOutX32WithoutTheABI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x32 is an amd64 ABI")
	}
	spec := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	if err := Apply(spec, nil); err != nil {
		t.Fatal(err)
	}
	arches := spec.Linux.Seccomp.Architectures
	if !slices.Contains(arches, specs.ArchX86_64) || !slices.Contains(arches, specs.ArchX86) {
		t.Fatalf("architectures %v: x86_64 and i386 must stay", arches)
	}
	if got := slices.Contains(arches, specs.ArchX32); got != x32Runs() {
		t.Fatalf("architectures %v, x32 ABI runs: %v", arches, x32Runs())
	}
	if cfg, err := exec.Command("sh", "-c", "zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r)").Output(); err == nil && len(cfg) > 0 {
		status, _ := os.ReadFile("/proc/self/status")
		if strings.Contains(string(cfg), "# CONFIG_X86_X32_ABI is not set") && strings.Contains(string(status), "\nSeccomp:\t0\n") && x32Runs() {
			t.Fatal("the kernel is built without the x32 ABI, yet the probe says x32 runs")
		}
	}
	// A profile of the client's is applied as written.
	if err := Apply(spec, DefaultJSON()); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(spec.Linux.Seccomp.Architectures, specs.ArchX32) {
		t.Fatalf("a client's profile lost x32: %v", spec.Linux.Seccomp.Architectures)
	}
}
