package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
)

// A pod's default infra container runs catatonit in pause mode: a process
// that does nothing but hold the pod's namespaces. The engine starts that
// process itself, without conmon and the OCI runtime, which saves two
// process start-ups of the runtime (runc and its init) and one of conmon on
// every pod: the larger part of what creating and starting a pod costs.
//
// The process is started as the container's spec says for what a pause
// process can use of it: the namespaces (new or joined; pid, ipc, uts and
// network), the hostname, the cgroup (in every hierarchy, as runc's cgroupfs
// manager lays them out), the environment and the user. It runs chrooted in
// the container's root filesystem, which must hold the host's own catatonit
// (the engine's infra image is built from it), with an empty capability
// bounding set, so it holds no privilege it could use, and no new ones.
// Specs that ask for more (user or cgroup namespaces, a terminal) are not
// pause specs: canPause says so and the caller creates them with the OCI
// runtime.
//
// The engine reaps the process and writes its exit file as conmon would, so
// the rest of the engine sees a container like any other. A pause process
// outlives the engine; after a restart the engine watches it again, and an
// exit it did not see is recorded with the signal it had sent, if any.

// pauseArgs is the process a pause container runs.
var pauseArgs = []string{"/catatonit", "-P"}

// pauseState is what the runtime keeps of a pause process, in
// RunRoot/pause/<id>/state.json.
type pauseState struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	// CgroupPaths are the process's cgroup directories, one per hierarchy.
	CgroupPaths []string `json:"cgroup_paths"`
	// Started is set by Start: until then the container is "created".
	Started bool `json:"started"`
	// Signal is the last signal the engine sent: the exit code of an exit
	// that happened while no engine was watching is 128 plus it.
	Signal int `json:"signal,omitempty"`
}

// pauseTracker knows which pause processes have an exit watch that has not
// recorded the exit yet.
type pauseTracker struct {
	mu       sync.Mutex
	watching map[string]bool

	hostOnce sync.Once
	host     []byte
	hostErr  error
}

func (r *Runtime) pauseDir(id string) string { return filepath.Join(r.pauseRoot, id) }

// isPause tells whether container id is a pause process.
func (r *Runtime) isPause(id string) bool {
	_, err := os.Stat(filepath.Join(r.pauseDir(id), "state.json"))
	return err == nil
}

// canPause tells whether a container's spec can run as a pause process:
// it runs catatonit -P, without terminal or stdin, under no AppArmor,
// SELinux or seccomp confinement, and asks only for namespaces the engine
// can set up.
func canPause(spec *specs.Spec, terminal, stdin bool) bool {
	if spec == nil || spec.Process == nil || spec.Root == nil || spec.Linux == nil || terminal || stdin {
		return false
	}
	// Confinement the engine does not apply itself is runc's to apply,
	// and so are sysctls other than those of the process's own namespaces.
	if spec.Process.ApparmorProfile != "" || spec.Process.SelinuxLabel != "" || spec.Linux.Seccomp != nil || !pauseSysctls(spec) {
		return false
	}
	if len(spec.Process.Args) != len(pauseArgs) {
		return false
	}
	for i, a := range pauseArgs {
		if spec.Process.Args[i] != a {
			return false
		}
	}
	for _, ns := range spec.Linux.Namespaces {
		switch ns.Type {
		case specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.NetworkNamespace:
		case specs.MountNamespace:
			if ns.Path != "" {
				return false
			}
		default:
			return false
		}
	}
	return strings.HasPrefix(spec.Linux.CgroupsPath, "/")
}

// procSysWritable tells whether the engine can write sysctls through
// /proc/sys (not where it runs in a container that mounts it read-only).
var procSysWritable = sync.OnceValue(func() bool {
	// The mount's flags, not access(2): /proc/sys is mode 0555 anyway.
	var st unix.Statfs_t
	return unix.Statfs("/proc/sys", &st) == nil && st.Flags&unix.ST_RDONLY == 0
})

// pauseSysctls tells whether the pause process can set the spec's sysctls
// itself: each must belong to a namespace the spec gives the process (net.*
// to its network namespace; kernel.shm*, kernel.msg*, kernel.sem and
// fs.mqueue.* to its IPC namespace), so that writing it changes nothing of
// the host's. Anything else is runc's to set or refuse.
func pauseSysctls(spec *specs.Spec) bool {
	own := map[specs.LinuxNamespaceType]bool{}
	for _, ns := range spec.Linux.Namespaces {
		own[ns.Type] = true
	}
	for k := range spec.Linux.Sysctl {
		if strings.ContainsAny(k, "/\x00") || strings.Contains(k, "..") {
			return false
		}
		switch {
		case strings.HasPrefix(k, "net.") && own[specs.NetworkNamespace]:
		case (k == "kernel.sem" || strings.HasPrefix(k, "kernel.shm") || strings.HasPrefix(k, "kernel.msg") || strings.HasPrefix(k, "fs.mqueue.")) && own[specs.IPCNamespace]:
		default:
			return false
		}
	}
	return true
}

// hostCatatonit is the content of the host's catatonit, which a pause
// container's root filesystem must hold.
func (r *Runtime) hostCatatonit() ([]byte, error) {
	r.pause.hostOnce.Do(func() {
		p, err := lookPath("catatonit")
		if err != nil {
			r.pause.hostErr = err
			return
		}
		r.pause.host, r.pause.hostErr = os.ReadFile(p)
	})
	return r.pause.host, r.pause.hostErr
}

// createPause starts the pause process of container o.ID as its spec in
// o.Bundle says. Nothing is left behind when it fails. handled is false when
// the container is not a pause process after all (its spec asks for more,
// or its root does not hold the engine's catatonit): the OCI runtime
// creates it then.
func (r *Runtime) createPause(o CreateOptions) (out Created, handled bool, err error) {
	data, err := os.ReadFile(filepath.Join(o.Bundle, "config.json"))
	if err != nil {
		return out, false, nil
	}
	var spec specs.Spec
	if json.Unmarshal(data, &spec) != nil || !canPause(&spec, o.Terminal, o.Stdin) {
		return out, false, nil
	}
	if len(o.Held) > 0 {
		// catatonit closes every descriptor above stderr when it starts,
		// so it cannot hold the pod's published ports: conmon does.
		return out, false, nil
	}
	host, err := r.hostCatatonit()
	if err != nil {
		return out, false, nil
	}
	root := spec.Root.Path
	if !filepath.IsAbs(root) {
		root = filepath.Join(o.Bundle, root)
	}
	if inRoot, err := os.ReadFile(filepath.Join(root, "catatonit")); err != nil || !bytes.Equal(inRoot, host) {
		r.logger.Debug("infra root does not hold the engine's catatonit: created by the OCI runtime", "container", o.ID)
		return out, false, nil
	}
	if len(spec.Linux.Sysctl) > 0 && !procSysWritable() {
		// /proc/sys is read-only here (the engine runs in a container):
		// the pause process cannot set sysctls, runc (which mounts a
		// /proc of the container's own) can. The engine's default alone
		// is left out, as it was before pause processes set any, rather
		// than give every pod's infra to runc.
		if len(spec.Linux.Sysctl) != 1 || spec.Linux.Sysctl[oci.PingGroupRange] != oci.DefaultPingGroupRange {
			r.logger.Debug("read-only /proc/sys: the infra container's sysctls are set by the OCI runtime", "container", o.ID)
			return out, false, nil
		}
		spec.Linux.Sysctl = nil
	}
	os.Remove(r.ExitFile(o.ID))
	out, err = r.startPause(o, &spec, root)
	return out, true, err
}

func (r *Runtime) startPause(o CreateOptions, spec *specs.Spec, root string) (out Created, err error) {
	dir := r.pauseDir(o.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return out, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if o.LogPath != "" {
		// conmon creates the log file; logs of an infra container are empty.
		if f, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Close()
		}
	}
	paths, err := makeCgroups(spec.Linux.CgroupsPath)
	if err != nil {
		return out, err
	}
	pid, err := spawnPause(spec, root)
	if err != nil {
		removeCgroups(paths)
		return out, &CreateError{Message: err.Error()}
	}
	fail := func(err error) (Created, error) {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		removeCgroups(paths)
		return out, err
	}
	for _, p := range paths {
		if err := os.WriteFile(filepath.Join(p, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fail(fmt.Errorf("pause process: join cgroup %s: %w", p, err))
		}
	}
	if err := applyProcessLimits(pid, spec.Process); err != nil {
		return fail(err)
	}
	start, err := processStart(pid)
	if err != nil {
		return fail(err)
	}
	st := pauseState{PID: pid, Start: start, CgroupPaths: paths}
	if err := r.writePauseState(o.ID, st); err != nil {
		return fail(err)
	}
	// conmon's pid files: the pod's systemd unit (generate systemd) follows
	// the infra container's "conmon" through conmon.pid, and the pause
	// process lives exactly as long as the container, as conmon does.
	for _, name := range []string{"pidfile", "conmon.pid"} {
		if err := os.WriteFile(filepath.Join(o.Bundle, name), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fail(err)
		}
	}
	r.watchPause(o.ID, st, true)
	out.PID = pid
	out.Pause = true
	return out, nil
}

// applyProcessLimits gives the pause process the spec's rlimits and OOM
// score adjustment, as runc gives them to a container's process.
func applyProcessLimits(pid int, p *specs.Process) error {
	for _, l := range p.Rlimits {
		res, ok := oci.RlimitResource(l.Type)
		if !ok {
			return &CreateError{Message: fmt.Sprintf("pause process: unknown rlimit %q", l.Type)}
		}
		if err := unix.Prlimit(pid, res, &unix.Rlimit{Cur: l.Soft, Max: l.Hard}, nil); err != nil {
			return &CreateError{Message: fmt.Sprintf("pause process: set %s to %d:%d: %v", l.Type, l.Soft, l.Hard, err)}
		}
	}
	if p.OOMScoreAdj != nil {
		path := fmt.Sprintf("/proc/%d/oom_score_adj", pid)
		if err := os.WriteFile(path, []byte(strconv.Itoa(*p.OOMScoreAdj)), 0o644); err != nil {
			return &CreateError{Message: fmt.Sprintf("pause process: OOM score adjustment %d: %v", *p.OOMScoreAdj, err)}
		}
	}
	return nil
}

// spawnPause forks the pause process from a thread of its own, which it
// first moves into the namespaces the process is to have: the child
// inherits them. The thread is never given back to the scheduler (the
// goroutine ends locked, so the Go runtime retires it). The main thread,
// which the runtime cannot retire, is never used: a goroutine that lands on
// it holds it while another does the work.
func spawnPause(spec *specs.Spec, root string) (int, error) {
	type result struct {
		pid int
		err error
	}
	var onThread func() result
	onThread = func() result {
		done := make(chan result, 1)
		go func() {
			goruntime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				done <- onThread()
				goruntime.UnlockOSThread()
				return
			}
			pid, err := forkPause(spec, root)
			done <- result{pid, err}
		}()
		return <-done
	}
	res := onThread()
	return res.pid, res.err
}

// forkPause runs on a locked thread that is thrown away afterwards.
func forkPause(spec *specs.Spec, root string) (int, error) {
	var unshare, clone uintptr
	hostname := false
	for _, ns := range spec.Linux.Namespaces {
		flag := map[specs.LinuxNamespaceType]int{
			specs.PIDNamespace: unix.CLONE_NEWPID, specs.IPCNamespace: unix.CLONE_NEWIPC,
			specs.UTSNamespace: unix.CLONE_NEWUTS, specs.NetworkNamespace: unix.CLONE_NEWNET,
			specs.MountNamespace: unix.CLONE_NEWNS,
		}[ns.Type]
		switch {
		case ns.Type == specs.MountNamespace:
			// The process only needs its root: it is chrooted, and a
			// copy of the engine's mount table would cost more than it
			// protects.
		case ns.Path != "":
			f, err := os.Open(ns.Path)
			if err != nil {
				return 0, fmt.Errorf("pause process: %s namespace: %w", ns.Type, err)
			}
			err = unix.Setns(int(f.Fd()), flag)
			f.Close()
			if err != nil {
				return 0, fmt.Errorf("pause process: join %s namespace %s: %w", ns.Type, ns.Path, err)
			}
		case ns.Type == specs.PIDNamespace:
			clone |= uintptr(flag)
		default:
			unshare |= uintptr(flag)
			hostname = hostname || ns.Type == specs.UTSNamespace
		}
	}
	if unshare != 0 {
		if err := unix.Unshare(int(unshare)); err != nil {
			return 0, fmt.Errorf("pause process: unshare namespaces: %w", err)
		}
	}
	if unshare&unix.CLONE_NEWNET != 0 {
		// A new network namespace has its loopback down; runc brings it up.
		if err := loopbackUp(); err != nil {
			return 0, fmt.Errorf("pause process: loopback: %w", err)
		}
	}
	if hostname && spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return 0, fmt.Errorf("pause process: set hostname: %w", err)
		}
	}
	// The sysctls of the thread's own network and IPC namespaces
	// (pauseSysctls), as runc would write them: /proc/sys resolves them in
	// the namespaces of the thread that opens the file.
	for k, v := range spec.Linux.Sysctl {
		if err := os.WriteFile("/proc/sys/"+strings.ReplaceAll(k, ".", "/"), []byte(v), 0); err != nil {
			return 0, fmt.Errorf("pause process: sysctl %s: %w", k, err)
		}
	}
	// The bounding set and no_new_privs belong to the thread and pass to
	// its children: the process execs catatonit as root without any
	// capability, so it cannot leave its root or gain one.
	for c := 0; c <= lastCap(); c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return 0, fmt.Errorf("pause process: drop capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("pause process: no_new_privs: %w", err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	fd := devnull.Fd()
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   spec.Process.Env,
		Files: []uintptr{fd, fd, fd},
		Sys: &syscall.SysProcAttr{
			Chroot:     root,
			Setsid:     true,
			Cloneflags: clone,
			Credential: &syscall.Credential{Uid: spec.Process.User.UID, Gid: spec.Process.User.GID, Groups: spec.Process.User.AdditionalGids},
		},
	}
	pid, err := syscall.ForkExec(pauseArgs[0], pauseArgs, attr)
	if err != nil {
		return 0, fmt.Errorf("pause process: start %s: %w", pauseArgs[0], err)
	}
	return pid, nil
}

// loopbackUp brings up lo in the calling thread's network namespace.
func loopbackUp() error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	return h.LinkSetUp(lo)
}

// lastCap is the highest capability number the kernel knows.
func lastCap() int {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 40
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 40
	}
	return n
}

// procStat reads a process's state, parent and start time (fields 3, 4
// and 22 of /proc/PID/stat); the start time tells it apart from a later
// process with the same PID.
func procStat(pid int) (state string, ppid int, start uint64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, err
	}
	// The command name before the fields may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return "", 0, 0, errors.New("malformed /proc stat")
	}
	ppid, _ = strconv.Atoi(fields[1])
	start, err = strconv.ParseUint(fields[19], 10, 64)
	return fields[0], ppid, start, err
}

// processStart is a process's start time.
func processStart(pid int) (uint64, error) {
	_, _, start, err := procStat(pid)
	return start, err
}

// pauseAlive tells whether the pause process of st still runs (a zombie
// does not).
func pauseAlive(st pauseState) bool {
	start, err := processStart(st.PID)
	return err == nil && start == st.Start && ProcessAlive(st.PID)
}

func (r *Runtime) readPauseState(id string) (pauseState, error) {
	var st pauseState
	data, err := os.ReadFile(filepath.Join(r.pauseDir(id), "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("pause process %s: %w", id, ErrNotExist)
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("pause process %s: %w", id, err)
	}
	return st, nil
}

func (r *Runtime) writePauseState(id string, st pauseState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	dir := r.pauseDir(id)
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}

// watchPause waits, without holding a thread, for the pause process to
// exit, and writes its exit file. child: the process is this engine's child,
// so its exit status can be collected.
func (r *Runtime) watchPause(id string, st pauseState, child bool) {
	fd, err := unix.PidfdOpen(st.PID, unix.PIDFD_NONBLOCK)
	if err != nil {
		r.pauseExited(id, st, child)
		return
	}
	r.pause.mu.Lock()
	if r.pause.watching == nil {
		r.pause.watching = map[string]bool{}
	}
	r.pause.watching[id] = true
	r.pause.mu.Unlock()
	f := os.NewFile(uintptr(fd), "pidfd")
	go func() {
		defer f.Close()
		rc, err := f.SyscallConn()
		if err == nil {
			err = rc.Read(func(fd uintptr) bool {
				return unix.PidfdSendSignal(int(fd), 0, nil, 0) != nil || !pauseAlive(st)
			})
		}
		if err != nil {
			// Not pollable: wait on a thread of its own.
			pidfdWait(fd, 100*365*24*time.Hour)
		}
		r.pauseExited(id, st, child)
	}()
}

// pauseExited collects the exit status of a pause process and writes its
// exit file (unless one is there already).
func (r *Runtime) pauseExited(id string, st pauseState, child bool) {
	defer func() {
		r.pause.mu.Lock()
		delete(r.pause.watching, id)
		r.pause.mu.Unlock()
	}()
	code := -1
	if child {
		var ws unix.WaitStatus
		if wpid, err := unix.Wait4(st.PID, &ws, 0, nil); err == nil && wpid == st.PID {
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			}
		}
	}
	if code < 0 {
		// Not ours to wait for (an earlier engine started it): the last
		// signal sent says how it ended.
		if cur, err := r.readPauseState(id); err == nil && cur.Signal > 0 {
			code = 128 + cur.Signal
		}
	}
	if code < 0 {
		return
	}
	r.writeExitFile(id, code)
}

// writeExitFile writes an exit file as conmon does (the code in decimal),
// never replacing one that is there.
func (r *Runtime) writeExitFile(id string, code int) {
	tmp, err := os.CreateTemp(r.exitDir, id+".*")
	if err != nil {
		r.logger.Warn("pause process exit file", "container", id, "err", err)
		return
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(strconv.Itoa(code))
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		r.logger.Warn("pause process exit file", "container", id, "err", errors.Join(werr, cerr))
		return
	}
	if err := os.Link(tmp.Name(), r.ExitFile(id)); err != nil && !errors.Is(err, os.ErrExist) {
		r.logger.Warn("pause process exit file", "container", id, "err", err)
	}
}

// ExitPending tells whether the engine watches container id's pause process
// and has not written its exit file yet: a pause process that has exited
// may not have its exit file for a moment.
func (r *Runtime) ExitPending(id string) bool {
	r.pause.mu.Lock()
	defer r.pause.mu.Unlock()
	return r.pause.watching[id]
}

// adoptPauses watches the pause processes an earlier engine started, and
// writes the exit files of those that ended meanwhile.
func (r *Runtime) adoptPauses() {
	entries, err := os.ReadDir(r.pauseRoot)
	if err != nil {
		return
	}
	for _, e := range entries {
		id := e.Name()
		st, err := r.readPauseState(id)
		if err != nil {
			continue
		}
		r.pause.mu.Lock()
		watched := r.pause.watching[id]
		r.pause.mu.Unlock()
		if watched {
			continue
		}
		if _, _, ok, _ := r.ReadExit(id); ok {
			continue
		}
		if pauseAlive(st) {
			// Still this process's child when an engine in the same
			// process started it (tests restart engines in-process).
			r.watchPause(id, st, isChild(st.PID))
			continue
		}
		r.pauseExited(id, st, false)
	}
}

// isChild tells whether pid is a child of this process.
func isChild(pid int) bool {
	_, ppid, _, err := procStat(pid)
	return err == nil && ppid == os.Getpid()
}

// pauseStart marks the pause process started.
func (r *Runtime) pauseStart(id string) error {
	st, err := r.readPauseState(id)
	if err != nil {
		return err
	}
	if !pauseAlive(st) {
		return fmt.Errorf("pause process of %s has exited", id)
	}
	st.Started = true
	return r.writePauseState(id, st)
}

// pauseStatus is the OCI state of a pause process.
func (r *Runtime) pauseStatus(id string) (State, error) {
	st, err := r.readPauseState(id)
	if err != nil {
		return State{}, err
	}
	if !pauseAlive(st) {
		return State{Status: "stopped"}, nil
	}
	out := State{Status: "running", Pid: st.PID}
	if !st.Started {
		out.Status = "created"
	}
	if cg, ok := pauseFreezerCgroup(st); ok && cgroups.Host().Frozen(cg) {
		out.Status = "paused"
	}
	return out, nil
}

// pauseKill signals the pause process (every process of a pause container
// is the pause process).
func (r *Runtime) pauseKill(id string, sig syscall.Signal) error {
	st, err := r.readPauseState(id)
	if err != nil {
		return err
	}
	if !pauseAlive(st) {
		return fmt.Errorf("pause process of %s: %w", id, ErrNotExist)
	}
	st.Signal = int(sig)
	if err := r.writePauseState(id, st); err != nil {
		return err
	}
	return unix.Kill(st.PID, sig)
}

// pauseDelete kills the pause process if force (else it must have exited),
// and removes its cgroups and state.
func (r *Runtime) pauseDelete(id string, force bool) error {
	st, err := r.readPauseState(id)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if pauseAlive(st) {
		if !force {
			return fmt.Errorf("pause process of %s is running", id)
		}
		if err := r.pauseKill(id, syscall.SIGKILL); err != nil && !errors.Is(err, ErrNotExist) {
			return err
		}
		// The exit watch reaps it; the cgroups empty once it is gone.
		deadline := time.Now().Add(5 * time.Second)
		for pauseAlive(st) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := removeCgroups(st.CgroupPaths); err != nil {
		return err
	}
	return os.RemoveAll(r.pauseDir(id))
}

// pauseFreeze freezes or thaws the pause process through its cgroup: the
// freezer hierarchy on v1, cgroup.freeze on the unified hierarchy.
func (r *Runtime) pauseFreeze(id string, freeze bool) error {
	st, err := r.readPauseState(id)
	if err != nil {
		return err
	}
	cg, ok := pauseFreezerCgroup(st)
	if !ok {
		return fmt.Errorf("pause process of %s: no freezer cgroup", id)
	}
	if err := cgroups.Host().Freeze(cg, freeze); err != nil {
		return fmt.Errorf("pause process of %s: %w", id, err)
	}
	return nil
}

// pauseFreezerCgroup is the cgroup that freezes the pause process: its
// freezer hierarchy's on v1, its only one on v2.
func pauseFreezerCgroup(st pauseState) (string, bool) {
	h := cgroups.Host()
	for _, p := range st.CgroupPaths {
		if !h.Unified() && !strings.HasPrefix(p, h.Dir("freezer", "/")+"/") {
			continue
		}
		return h.Rel(p)
	}
	return "", false
}

// errPause is the answer of the operations a pause process has no use for.
func errPause(op, id string) error {
	return fmt.Errorf("%s: container %s is its pod's pause process, which runs nothing but catatonit: %w", op, id, core.ErrStateConflict)
}
