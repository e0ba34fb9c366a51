// Package seccomp chooses and checks the system call filter of a container's
// processes. By default every container, exec session and build RUN step
// gets Docker's default profile (github.com/moby/profiles/seccomp, pinned in
// go.mod), which Podman's own default closely follows: it refuses the calls a
// container has no business making (kernel modules, keyrings, reboot, new
// user namespaces, mount, ptrace without CAP_SYS_PTRACE ...). A client may
// instead name a profile file of its own or "unconfined".
//
// A profile is read and checked when the container is created, and its text
// is kept with the container: the container keeps the filter it was created
// with even if the file changes or goes away later, as with Docker.
package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Unconfined is the profile name that turns the filter off.
const Unconfined = "unconfined"

// PodmanDefaultPath is the file Podman's clients name when they mean "the
// default profile" (podman build always sends it): the engine reads it as
// its own default rather than as a file of the client's.
const PodmanDefaultPath = "/usr/share/containers/seccomp.json"

// ErrInvalidProfile is wrapped by every error about a profile's content.
var ErrInvalidProfile = errors.New("invalid seccomp profile")

// defaultJSON is the default profile, marshalled once.
var defaultJSON = sync.OnceValue(func() []byte {
	data, err := json.MarshalIndent(mobyseccomp.DefaultProfile(), "", "\t")
	if err != nil {
		panic(fmt.Sprintf("seccomp: marshal the default profile: %v", err))
	}
	return data
})

// DefaultJSON returns the default profile as JSON (a profile a client can
// copy, change and pass back by path).
func DefaultJSON() []byte { return bytes.Clone(defaultJSON()) }

// WriteDefault writes the default profile to path (atomically), so that
// `info` can name a file holding exactly the profile the engine applies.
func WriteDefault(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".seccomp-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(defaultJSON()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Supported tells whether the kernel can filter system calls: it answers
// PR_GET_SECCOMP (EINVAL without CONFIG_SECCOMP) and lists the filter
// actions (only with CONFIG_SECCOMP_FILTER, the mode runc uses).
func Supported() bool {
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return false
	}
	_, err := os.Stat("/proc/sys/kernel/seccomp/actions_avail")
	return err == nil
}

// LoadFile reads and checks the profile at path. Errors name the file and,
// for content, the member that is wrong; they wrap ErrInvalidProfile (or
// the file system's error when the file cannot be read).
func LoadFile(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: %s: the path must be absolute", ErrInvalidProfile, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidProfile, path, err)
	}
	if err := Check(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// Known actions, operators and architectures: what runc (libseccomp 2.5)
// accepts. Anything else would only fail later, at start, in runc.
var (
	knownActions = set(specs.ActKill, specs.ActKillProcess, specs.ActKillThread, specs.ActTrap, specs.ActErrno,
		specs.ActTrace, specs.ActAllow, specs.ActLog, specs.ActNotify)
	knownOps = set(specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual, specs.OpEqualTo, specs.OpGreaterEqual,
		specs.OpGreaterThan, specs.OpMaskedEqual)
	knownArches = set(specs.ArchX86, specs.ArchX86_64, specs.ArchX32, specs.ArchARM, specs.ArchAARCH64, specs.ArchMIPS,
		specs.ArchMIPS64, specs.ArchMIPS64N32, specs.ArchMIPSEL, specs.ArchMIPSEL64, specs.ArchMIPSEL64N32, specs.ArchPPC,
		specs.ArchPPC64, specs.ArchPPC64LE, specs.ArchS390, specs.ArchS390X, specs.ArchPARISC, specs.ArchPARISC64,
		specs.ArchRISCV64, specs.ArchLOONGARCH64, specs.ArchM68K, specs.ArchSH, specs.ArchSHEB)
)

func set[T ~string](vals ...T) map[T]bool {
	m := make(map[T]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}

// Check tells whether data is a profile the engine can apply: JSON in
// Docker's profile format, with known actions, operators and
// architectures. The error names the member at fault ("syscalls[3].action").
func Check(data []byte) error {
	var p mobyseccomp.Seccomp
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("%w: not a JSON profile: %s", ErrInvalidProfile, jsonError(data, err))
	}
	if dec.More() {
		return fmt.Errorf("%w: not a JSON profile: more than one JSON value", ErrInvalidProfile)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidProfile, field, fmt.Sprintf(format, args...))
	}
	if p.DefaultAction == "" && len(p.Syscalls) == 0 {
		return bad("defaultAction", "the profile has neither a default action nor rules (use %q to turn the filter off)", Unconfined)
	}
	if !knownActions[p.DefaultAction] {
		return bad("defaultAction", "unknown action %q", p.DefaultAction)
	}
	for i, a := range p.Architectures {
		if !knownArches[a] {
			return bad(fmt.Sprintf("architectures[%d]", i), "unknown architecture %q", a)
		}
	}
	for i, a := range p.ArchMap {
		if !knownArches[a.Arch] {
			return bad(fmt.Sprintf("archMap[%d].architecture", i), "unknown architecture %q", a.Arch)
		}
	}
	if len(p.Architectures) > 0 && len(p.ArchMap) > 0 {
		return bad("archMap", "a profile names either architectures or archMap, not both")
	}
	for i, sc := range p.Syscalls {
		field := fmt.Sprintf("syscalls[%d]", i)
		if sc == nil {
			return bad(field, "null rule")
		}
		if !knownActions[sc.Action] {
			return bad(field+".action", "unknown action %q", sc.Action)
		}
		if sc.Name == "" && len(sc.Names) == 0 {
			return bad(field+".names", "the rule names no system call")
		}
		if sc.Name != "" && len(sc.Names) > 0 {
			return bad(field+".name", "a rule has either name or names, not both")
		}
		for j, n := range sc.Names {
			if n == "" || strings.ContainsAny(n, " \t\n") {
				return bad(fmt.Sprintf("%s.names[%d]", field, j), "%q is not a system call name", n)
			}
		}
		for j, arg := range sc.Args {
			if !knownOps[arg.Op] {
				return bad(fmt.Sprintf("%s.args[%d].op", field, j), "unknown operator %q", arg.Op)
			}
			if arg.Index > 5 {
				return bad(fmt.Sprintf("%s.args[%d].index", field, j), "%d is not an argument index (0..5)", arg.Index)
			}
		}
	}
	return nil
}

// jsonError places a decoding error in the text: line and column of a
// syntax error, the member of a type error.
func jsonError(data []byte, err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		line, col := position(data, syn.Offset)
		return fmt.Sprintf("line %d, column %d: %v", line, col, err)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field != "" {
		return fmt.Sprintf("%s: %s is not a %s", typ.Field, typ.Value, typ.Type)
	}
	return err.Error()
}

// position is the line and column of the byte before offset: a syntax
// error's offset counts the offending byte as read.
func position(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset-1 && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// Apply sets the filter of spec's process: profile's rules (nil: the
// default profile) resolved for the process's capabilities, the machine's
// architecture and kernel, as Docker does. It must run after the
// capabilities are set: rules such as ptrace's depend on them.
func Apply(spec *specs.Spec, profile []byte) error {
	if spec.Process == nil || spec.Linux == nil {
		return errors.New("seccomp: the spec has no process or linux section")
	}
	if spec.Process.Capabilities == nil {
		spec.Process.Capabilities = &specs.LinuxCapabilities{}
	}
	var (
		filter *specs.LinuxSeccomp
		err    error
	)
	if profile == nil {
		filter, err = mobyseccomp.GetDefaultProfile(spec)
		if err == nil && !x32Runs() {
			filter.Architectures = slices.DeleteFunc(filter.Architectures, func(a specs.Arch) bool { return a == specs.ArchX32 })
		}
	} else {
		filter, err = mobyseccomp.LoadProfile(string(profile), spec)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidProfile, err)
	}
	spec.Linux.Seccomp = filter
	return nil
}

// x32Runs tells whether the kernel runs system calls of the x32 ABI (amd64
// processes with 32-bit pointers). Docker's profile lists x32 beside x86_64
// and i386, and runc 1.1 with libseccomp 2.5 compiles the rules once per
// listed architecture, at every container start: x32 alone costs about
// 10 ms of CPU per start on these machines (docs/engine/security.md). Where
// the kernel has no x32 ABI (CONFIG_X86_X32_ABI unset, or Debian's
// syscall.x32 off), no x32 program can run at all, so the default filter
// leaves x32 out: an x32 system call is then refused by the filter (the
// process is killed) instead of by the kernel (ENOSYS), and nothing that
// worked stops working. i386 stays: 32-bit programs run on these kernels.
//
// The probe is getpid with the x32 bit: ENOSYS without the ABI. It is made
// only when the engine itself runs unfiltered: under a filter of its own
// that leaves x32 out the probe could kill the engine, so x32 is kept.
var x32Runs = sync.OnceValue(func() bool {
	if runtime.GOARCH != "amd64" {
		return true
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil || !bytes.Contains(status, []byte("\nSeccomp:\t0\n")) {
		return true
	}
	const x32SyscallBit = 0x40000000
	_, _, errno := unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0)
	return errno != unix.ENOSYS
})
