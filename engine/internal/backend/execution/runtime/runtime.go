// Package runtime runs containers with conmon and an OCI runtime (runc, or
// crun where cgroups v2 allow it). conmon supervises each container: it holds
// its stdio, writes the k8s-file log, serves the attach socket and writes the
// exit code to the exit directory; the engine does not need to stay alive for
// any of that.
package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/core"
)

// ErrNotExist is returned when the OCI runtime does not know the container.
var ErrNotExist = errors.New("container does not exist in the OCI runtime")

// Options configures a Runtime.
type Options struct {
	// Name is "runc" or "crun"; Path overrides the binary looked up in PATH.
	Name, Path string
	// ConmonPath overrides the conmon binary looked up in PATH.
	ConmonPath string
	// RunRoot is the engine's runtime state directory; the runtime keeps its
	// state in RunRoot/<name>, exit files in RunRoot/exits and attach sockets
	// in RunRoot/socket.
	RunRoot string
	// CRIUPath is the CRIU binary runc checkpoints and restores with; empty
	// leaves runc to find "criu" in PATH. Debian 12's CRIU cannot start on
	// newer kernels, so a working build may live outside PATH
	// (hack/criu.sh).
	CRIUPath string
	Logger   *slog.Logger
}

// Runtime drives conmon and the OCI runtime binary.
type Runtime struct {
	name, path string
	conmon     string
	stateRoot  string
	exitDir    string
	socketDir  string
	pauseRoot  string
	// noCgroupDir marks the containers created without a cgroup of their
	// own (a file named by the ID; see CreateOptions.NoCgroup).
	noCgroupDir string
	// globalArgs go before every runtime command (--root, --criu).
	globalArgs []string
	logger     *slog.Logger
	pause      pauseTracker
	// criuLockOnce guards criuSkipsLock, SkipsNetworkLock's answer.
	criuLockOnce  sync.Once
	criuSkipsLock bool
	// criuPath is the CRIU given to runc (--criu); empty: criu from PATH.
	criuPath string
}

// New finds the binaries and creates the runtime's directories.
func New(o Options) (*Runtime, error) {
	if o.Name == "" {
		o.Name = "runc"
	}
	if o.Name != "runc" && o.Name != "crun" {
		return nil, fmt.Errorf("runtime %q is not supported (runc or crun)", o.Name)
	}
	path := o.Path
	if path == "" {
		p, err := lookPath(o.Name)
		if err != nil {
			return nil, fmt.Errorf("OCI runtime %s: %w", o.Name, err)
		}
		path = p
	}
	conmon := o.ConmonPath
	if conmon == "" {
		p, err := lookPath("conmon")
		if err != nil {
			return nil, fmt.Errorf("conmon: %w", err)
		}
		conmon = p
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{
		name: o.Name, path: path, conmon: conmon,
		stateRoot:   filepath.Join(o.RunRoot, o.Name),
		exitDir:     filepath.Join(o.RunRoot, "exits"),
		socketDir:   filepath.Join(o.RunRoot, "socket"),
		pauseRoot:   filepath.Join(o.RunRoot, "pause"),
		noCgroupDir: filepath.Join(o.RunRoot, "nocgroup"),
		logger:      o.Logger,
	}
	r.globalArgs = []string{"--root", r.stateRoot}
	if o.CRIUPath != "" {
		if o.Name != "runc" {
			return nil, fmt.Errorf("a CRIU path is only passed to runc, not %s", o.Name)
		}
		r.globalArgs = append(r.globalArgs, "--criu", o.CRIUPath)
		r.criuPath = o.CRIUPath
	}
	for _, d := range []string{r.stateRoot, r.exitDir, r.socketDir, r.pauseRoot, r.noCgroupDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// lookPath finds a binary in PATH and in the sbin and libexec directories
// Debian installs runtimes to, which are not always in a service's PATH.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/libexec/podman", "/usr/lib/podman"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", name)
}

// Name is the OCI runtime's name ("runc" or "crun").
func (r *Runtime) Name() string { return r.name }

// Path is the OCI runtime binary.
func (r *Runtime) Path() string { return r.path }

// ConmonPath is the conmon binary.
func (r *Runtime) ConmonPath() string { return r.conmon }

// ExitDir is where conmon writes exit files (one per container, named by ID).
func (r *Runtime) ExitDir() string { return r.exitDir }

// ExitFile is the exit file of container id.
func (r *Runtime) ExitFile(id string) string { return filepath.Join(r.exitDir, id) }

// AttachSocket is the attach socket conmon serves for the container whose
// bundle is bundle. conmon runs with --full-attach, which binds it there
// (through /proc/self/fd, so the path's length does not matter) and makes
// no link in the socket directory. Without it conmon links
// SOCKETDIR/ID to the bundle and reaches the socket through the link, but
// where that link's path is 107 bytes long (a sun_path's limit) it names
// the link one byte short of the ID: a client of SOCKETDIR/ID/attach then
// found no such directory (seen with test directories of that length).
// A conmon started before --full-attach served the same file through its
// link, so the bundle's path finds it too.
func (r *Runtime) AttachSocket(bundle string) string { return filepath.Join(bundle, "attach") }

// CreateOptions describes the container conmon is to create.
type CreateOptions struct {
	ID, Name string
	// Bundle holds config.json; conmon's pid files and fifos go there too.
	Bundle  string
	LogPath string
	// LogDriver is core.LogDriverJournald to send the output to the
	// journal (tagged LogTag when set) instead of LogPath.
	LogDriver, LogTag string
	// LogSizeMax (bytes, 0: none) makes conmon start LogPath over once it
	// would grow past it.
	LogSizeMax int64
	// Terminal allocates a pty; Stdin keeps a pipe to the process's stdin open.
	Terminal, Stdin bool
	// RestoreDir restores the container from a checkpoint instead of
	// creating it; RuntimeOpts are passed to "runtime restore".
	RestoreDir  string
	RuntimeOpts []string
	// Pause asks for the container to run as a pause process, without
	// conmon and the OCI runtime, where its spec allows (see pause.go).
	Pause bool
	// NoCgroup runs the container without a cgroup of its own (Podman's
	// --cgroups disabled): crun's --cgroup-manager disabled, for the
	// create and every later call on the container; conmon is not moved
	// anywhere. runc cannot.
	NoCgroup bool
	// SystemdCgroup: the spec's cgroupsPath is "SLICE:prefix:name" and runc
	// creates the container's scope through systemd (--systemd-cgroup).
	SystemdCgroup bool
	// ConmonScope, where set, is the transient scope (in ConmonSlice)
	// conmon is moved into once it runs, out of the engine's cgroup.
	ConmonScope, ConmonSlice string
	// ConmonCgroup, where set, is the cgroup (unified hierarchy) conmon is
	// moved into once it runs (the split mode).
	ConmonCgroup string
	// Held are files the container's monitor (conmon, or the pause
	// process) inherits and keeps open while the container runs: the
	// sockets that hold its published host ports. The caller keeps and
	// closes its own copies.
	Held []*os.File
}

// Created is what Create learned about the new container.
type Created struct {
	PID       int
	ConmonPID int
	// Pause: the container runs as a pause process (see pause.go).
	Pause bool
	// ConmonUnit is the scope conmon runs in, ConmonCgroup its cgroup in
	// split mode ("": the engine's cgroup).
	ConmonUnit, ConmonCgroup string
}

type syncMessage struct {
	Data    int    `json:"data"`
	Message string `json:"message,omitempty"`
}

// Create starts conmon, which runs "runtime create" and stays as the
// container's monitor. It returns once the container exists (state created)
// or with the runtime's error, learned through conmon's sync pipe.
func (r *Runtime) Create(ctx context.Context, o CreateOptions) (Created, error) {
	if o.NoCgroup {
		if err := r.markNoCgroup(o.ID); err != nil {
			return Created{}, err
		}
	} else {
		os.Remove(r.noCgroupMark(o.ID))
	}
	if o.Pause && o.RestoreDir == "" && !o.NoCgroup {
		if out, handled, err := r.createPause(o); handled {
			return out, err
		}
	}
	var out Created
	// Stale files from an earlier run of the same container would confuse
	// exit detection.
	os.Remove(r.ExitFile(o.ID))
	os.Remove(filepath.Join(r.socketDir, o.ID))
	// conmon creates "oom" in the bundle when the container's cgroup
	// counts an OOM kill; one from an earlier run must not count again.
	os.Remove(filepath.Join(o.Bundle, "oom"))

	syncR, syncW, err := os.Pipe()
	if err != nil {
		return out, err
	}
	defer syncR.Close()
	startR, startW, err := os.Pipe()
	if err != nil {
		syncW.Close()
		return out, err
	}
	args := []string{
		"--api-version", "1",
		"-c", o.ID, "-u", o.ID, "-n", o.Name,
		"-r", r.path, "-b", o.Bundle,
		"-p", filepath.Join(o.Bundle, "pidfile"),
		"--conmon-pidfile", filepath.Join(o.Bundle, "conmon.pid"),
		"--exit-dir", r.exitDir,
		"-l", logArg(o),
		"--socket-dir-path", r.socketDir,
		"--full-attach",
		"--log-level", "warning",
		"--syslog=false",
	}
	if o.LogDriver == core.LogDriverJournald && o.LogTag != "" {
		args = append(args, "--log-tag", o.LogTag)
	}
	if o.LogSizeMax > 0 && o.LogDriver != core.LogDriverJournald {
		args = append(args, "--log-size-max", strconv.FormatInt(o.LogSizeMax, 10))
	}
	for _, a := range r.globalArgsFor(o.ID) {
		args = append(args, "--runtime-arg", a)
	}
	if o.SystemdCgroup {
		// conmon reads the container's cgroup (OOM) the systemd way too.
		// runc's warnings (a device of the default list the host lacks
		// cannot be allowed through systemd) go to a file, not to the
		// container's stderr, which runc shares while it creates it; its
		// errors still reach stderr, where conmon reports them.
		args = append(args, "--runtime-arg", "--systemd-cgroup", "--systemd-cgroup",
			"--runtime-arg", "--log="+filepath.Join(o.Bundle, "runc.log"))
	}
	if o.Terminal {
		args = append(args, "-t")
	}
	if o.Stdin {
		args = append(args, "-i")
	}
	if o.RestoreDir != "" {
		args = append(args, "--restore", o.RestoreDir)
		for _, opt := range o.RuntimeOpts {
			args = append(args, "--runtime-opt", opt)
		}
	}
	cmd := exec.Command(r.conmon, args...)
	cmd.Env = append(minimalEnv(), "_OCI_SYNCPIPE=3", "_OCI_STARTPIPE=4")
	if o.RestoreDir != "" {
		// conmon passes its environment on to runc restore, and runc to CRIU.
		cmd.Env = append(cmd.Env, criuEnv()...)
	}
	// conmon keeps what it inherits open until it exits; runc's init
	// closes it before the container's process runs.
	cmd.ExtraFiles = append([]*os.File{syncW, startR}, o.Held...)
	cmd.Dir = o.Bundle
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// conmon must outlive the engine and ignore signals sent to its process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		syncW.Close()
		startR.Close()
		startW.Close()
		return out, fmt.Errorf("start conmon: %w", err)
	}
	syncW.Close()
	startR.Close()
	_, werr := startW.Write([]byte{0})
	startW.Close()
	if err := cmd.Wait(); err != nil {
		return out, fmt.Errorf("conmon: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if werr != nil {
		return out, fmt.Errorf("conmon start pipe: %w", werr)
	}
	// conmon's first process wrote the pid of the conmon that stays (its
	// child) before it exited.
	out.ConmonPID, _ = readPidFile(filepath.Join(o.Bundle, "conmon.pid"))
	var moved chan error
	if o.ConmonScope != "" && out.ConmonPID > 0 {
		// As Podman: conmon leaves the engine's cgroup for a scope of its
		// own, so that stopping the engine's service does not kill the
		// containers' monitors. The container runs all the same if this
		// fails; conmon then stays where it is. The D-Bus round trip and
		// systemd's job run while the runtime creates the container.
		moved = make(chan error, 1)
		go func() { moved <- cgroups.MoveToScope(ctx, o.ConmonScope, o.ConmonSlice, out.ConmonPID) }()
	}
	awaitMove := func() error {
		if moved == nil {
			return nil
		}
		return <-moved
	}

	msg, err := readSync(ctx, syncR)
	if err != nil {
		awaitMove()
		return out, fmt.Errorf("conmon sync pipe: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	if msg.Data <= 0 {
		awaitMove()
		return out, &CreateError{Message: cleanRuntimeMessage(msg.Message)}
	}
	out.PID = msg.Data
	if moved != nil {
		if err := awaitMove(); err != nil {
			r.logger.Warn("moving conmon into a scope of its own", "container", o.ID, "scope", o.ConmonScope, "err", err)
		} else {
			out.ConmonUnit = o.ConmonScope
		}
	}
	if o.ConmonCgroup != "" && out.ConmonPID > 0 {
		if err := cgroups.MoveToCgroup(o.ConmonCgroup, out.ConmonPID); err != nil {
			r.logger.Warn("moving conmon into its split cgroup", "container", o.ID, "cgroup", o.ConmonCgroup, "err", err)
		} else {
			out.ConmonCgroup = o.ConmonCgroup
		}
	}
	return out, nil
}

// CreateError is a failure of "runtime create" as conmon reported it (the
// command does not exist in the image, a mount failed, ...).
type CreateError struct{ Message string }

func (e *CreateError) Error() string { return e.Message }

func readSync(ctx context.Context, f *os.File) (syncMessage, error) {
	type result struct {
		msg syncMessage
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var m syncMessage
		err := json.NewDecoder(f).Decode(&m)
		if errors.Is(err, io.EOF) {
			err = errors.New("conmon exited without reporting the container's pid")
		}
		ch <- result{m, err}
	}()
	select {
	case res := <-ch:
		return res.msg, res.err
	case <-ctx.Done():
		f.SetReadDeadline(time.Now())
		return syncMessage{}, ctx.Err()
	}
}

var logfmtMsg = regexp.MustCompile(`msg="((?:[^"\\]|\\.)*)"`)

// cleanRuntimeMessage turns runc's JSON log line into its message text.
func cleanRuntimeMessage(m string) string {
	m = strings.TrimSpace(m)
	var line struct {
		Msg string `json:"msg"`
	}
	if strings.HasPrefix(m, "{") && json.Unmarshal([]byte(m), &line) == nil && line.Msg != "" {
		return line.Msg
	}
	// runc's text log format: time="..." level=error msg="..."
	if sub := logfmtMsg.FindStringSubmatch(m); sub != nil {
		if msg, err := strconv.Unquote(`"` + sub[1] + `"`); err == nil {
			return msg
		}
	}
	if m == "" {
		return "the OCI runtime failed to create the container"
	}
	return m
}

func readPidFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// minimalEnv is the environment of conmon and the runtime (conmon passes
// it on to the runtime; the container's own environment is its spec's).
// runc is a Go program that lives for a few milliseconds of work: its
// garbage collections were a sizeable part of the CPU a container's create
// and kill cost, so they wait until the heap reaches runtimeMemoryLimit,
// which a short-lived runc never does and a long-lived one is held to.
func minimalEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	return []string{"PATH=" + path, "GOGC=off", "GOMEMLIMIT=" + runtimeMemoryLimit}
}

// runtimeMemoryLimit is the heap size at which the runtime's garbage
// collector runs (see minimalEnv).
const runtimeMemoryLimit = "64MiB"

// noCgroupMark is the file that marks container id as created without a
// cgroup of its own.
func (r *Runtime) noCgroupMark(id string) string { return filepath.Join(r.noCgroupDir, id) }

// markNoCgroup marks container id as one without a cgroup: before conmon
// runs, so that an engine killed during the create still passes crun the
// option when it deletes what was created. Only crun can run one.
func (r *Runtime) markNoCgroup(id string) error {
	if r.name != "crun" {
		return fmt.Errorf("%s cannot run a container without a cgroup of its own (crun can)", r.name)
	}
	return os.WriteFile(r.noCgroupMark(id), nil, 0o600)
}

// NoCgroup reports whether container id was created without a cgroup of
// its own (CreateOptions.NoCgroup).
func (r *Runtime) NoCgroup(id string) bool {
	_, err := os.Stat(r.noCgroupMark(id))
	return err == nil
}

// noCgroupArgs are crun's global options for a container without a cgroup.
var noCgroupArgs = []string{"--cgroup-manager", "disabled"}

// globalArgsFor are the runtime's global options for a command on
// container id: crun is told again, on every call, that the container has
// no cgroup, so that none of its commands looks for one.
func (r *Runtime) globalArgsFor(id string) []string {
	if r.NoCgroup(id) {
		return append(slices.Clone(r.globalArgs), noCgroupArgs...)
	}
	return r.globalArgs
}

// run executes the runtime with the global --root and args.
func (r *Runtime) run(ctx context.Context, args ...string) ([]byte, error) {
	return r.runCmd(exec.CommandContext(ctx, r.path, append(slices.Clone(r.globalArgs), args...)...), args)
}

// runOn executes the runtime with args, a command on container id, and
// the container's global options (globalArgsFor).
func (r *Runtime) runOn(ctx context.Context, id string, args ...string) ([]byte, error) {
	r.settleFreezer(id)
	return r.runCmd(exec.CommandContext(ctx, r.path, append(slices.Clone(r.globalArgsFor(id)), args...)...), args)
}

// settleFreezer thaws container id's v1 freezer where it is stuck
// FREEZING (cgroups.SettleFreezer: a freeze that met an exec, a pause a
// killed engine left behind): runc 1.1 would wait for it without end in any
// command that reads the container's state, and an engine start that
// reconciles the container with it. A freezer in any other state costs a
// read of runc's state.json and of freezer.state.
func (r *Runtime) settleFreezer(id string) {
	h := cgroups.Host()
	if h.Unified() {
		return
	}
	if cg, ok := r.freezerCgroup(id); ok && h.SettleFreezer(cg, time.Second) {
		r.logger.Warn("thawed a container whose freeze could not finish (its cgroup stayed FREEZING)", "container", id)
	}
}

// runGroup is run with the runtime in a process group of its own, all of
// which is killed when ctx ends: what the runtime started (CRIU, started
// by runc for a checkpoint, in runc's group) goes with it, where killing
// runc alone would leave CRIU holding the container's processes. Its
// environment carries what CRIU needs on this machine (criuEnv).
func (r *Runtime) runGroup(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.path, append(slices.Clone(r.globalArgs), args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that outlived the kill would hold the output pipes open.
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(minimalEnv(), criuEnv()...)
	out, err := r.runCmd(cmd, args)
	if err != nil && ctx.Err() != nil {
		return out, fmt.Errorf("%s %s: %w (%s and what it started were killed)", r.name, args[0], context.Cause(ctx), r.name)
	}
	return out, err
}

// runCmd runs cmd, in minimalEnv unless cmd has an environment already.
func (r *Runtime) runCmd(cmd *exec.Cmd, args []string) ([]byte, error) {
	if cmd.Env == nil {
		cmd.Env = minimalEnv()
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "not found") && strings.Contains(msg, "container") {
			return nil, fmt.Errorf("%s %s: %w", r.name, args[0], ErrNotExist)
		}
		return nil, fmt.Errorf("%s %s: %w: %s", r.name, args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// Start starts a created container.
func (r *Runtime) Start(ctx context.Context, id string) error {
	if r.isPause(id) {
		return r.pauseStart(id)
	}
	if r.name == "runc" {
		err := r.startViaFifo(id)
		if err == nil {
			return nil
		}
		r.logger.Debug("in-process start failed, using the runtime", "container", id, "err", err)
	}
	_, err := r.runOn(ctx, id, "start", id)
	return err
}

// Exists tells whether the runtime (runc, or the engine for a pause
// process) holds state for container id.
func (r *Runtime) Exists(id string) bool {
	if r.isPause(id) {
		return true
	}
	_, err := os.Stat(filepath.Join(r.stateRoot, id))
	return err == nil
}

// State is the OCI runtime's view of a container.
type State struct {
	Status string `json:"status"`
	Pid    int    `json:"pid"`
}

// State asks the runtime for a container's state; ErrNotExist when unknown.
func (r *Runtime) State(ctx context.Context, id string) (State, error) {
	if r.isPause(id) {
		return r.pauseStatus(id)
	}
	if r.name == "runc" {
		if s, ok := r.stateFromFiles(id); ok {
			return s, nil
		}
	}
	var s State
	out, err := r.runOn(ctx, id, "state", id)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return s, fmt.Errorf("%s state %s: %w", r.name, id, err)
	}
	return s, nil
}

// Kill sends sig to the container's init process (all: to every process).
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	if r.isPause(id) {
		return r.pauseKill(id, sig)
	}
	if all && r.NoCgroup(id) {
		// No cgroup to find every process in: the container has a PID
		// namespace of its own (the containers backend checks), whose
		// init takes the others with it when it is killed (as Podman).
		all = false
	}
	if r.name == "runc" && (!all || sig == syscall.SIGKILL && r.ownPIDNamespace(id)) {
		// SIGKILL to the init of a PID namespace kills every process in
		// it: the whole container, as "runc kill --all" would.
		err := r.signalInit(id, sig)
		if err == nil {
			return nil
		}
		r.logger.Debug("in-process kill failed, using the runtime", "container", id, "err", err)
	}
	args := []string{"kill"}
	if all {
		args = append(args, "--all")
	}
	_, err := r.runOn(ctx, id, append(args, id, strconv.Itoa(int(sig)))...)
	return err
}

// Pause freezes every process of the container.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if r.isPause(id) {
		return r.pauseFreeze(id, true)
	}
	_, err := r.runOn(ctx, id, "pause", id)
	return err
}

// Resume thaws a paused container.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if r.isPause(id) {
		return r.pauseFreeze(id, false)
	}
	_, err := r.runOn(ctx, id, "resume", id)
	return err
}

// Delete removes the runtime's state and cgroup of a container; force kills
// it first when it still runs. A container the runtime does not know is not
// an error.
func (r *Runtime) Delete(ctx context.Context, id string, force bool) error {
	if r.isPause(id) {
		return r.pauseDelete(id, force)
	}
	args := []string{"delete"}
	if force {
		args = append(args, "--force")
	}
	_, err := r.runOn(ctx, id, append(args, id)...)
	if errors.Is(err, ErrNotExist) {
		err = nil
	}
	if err == nil {
		os.Remove(r.noCgroupMark(id))
	}
	return err
}

// Update changes the cgroup resources of a running container.
func (r *Runtime) Update(ctx context.Context, id string, res *specs.LinuxResources) error {
	if r.isPause(id) {
		return errPause("update", id)
	}
	f, err := os.CreateTemp("", "berth-update-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := json.NewEncoder(f).Encode(res); err != nil {
		f.Close()
		return err
	}
	f.Close()
	_, err = r.runOn(ctx, id, "update", "--resources", f.Name(), id)
	return err
}

// ReadExit reads the exit file of container id: its exit code and when it
// was written. ok is false while the file does not exist.
func (r *Runtime) ReadExit(id string) (code int32, at time.Time, ok bool, err error) {
	path := r.ExitFile(id)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, err
	}
	text := strings.TrimSpace(string(data))
	if text == "" {
		// conmon creates the file and writes it in two steps.
		return 0, time.Time{}, false, nil
	}
	v, err := strconv.Atoi(text)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("exit file %s: %w", path, err)
	}
	at = time.Now()
	if fi, err := os.Stat(path); err == nil {
		at = fi.ModTime()
	}
	return int32(v), at, true, nil
}

// Cleanup removes the exit file and the attach socket link of container id.
func (r *Runtime) Cleanup(id string) {
	os.Remove(r.ExitFile(id))
	os.Remove(filepath.Join(r.socketDir, id))
}

// ProcessAlive tells whether pid is a live process (not a zombie).
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err != nil {
		return errors.Is(err, unix.EPERM)
	}
	state, _, _, err := procStat(pid)
	return err == nil && state != "Z"
}

// WaitConmonExit waits up to timeout for the conmon of container id, process
// pid, to exit: conmon writes the exit file a moment before it exits, so a
// container seen as exited may still have its conmon. A conmon still running
// at the deadline is killed. A pid that no longer belongs to that container's
// conmon (it exited and the pid was reused) counts as exited. It reports
// whether conmon exited on its own.
func WaitConmonExit(pid int, id string, timeout time.Duration) bool {
	if pid <= 0 {
		return true
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return true // no such process
	}
	defer unix.Close(fd)
	// Checked after opening the pidfd: it refers to this process from now on.
	if !isConmonOf(pid, id) {
		return true
	}
	if pidfdWait(fd, timeout) {
		return true
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	pidfdWait(fd, 5*time.Second)
	return false
}

// pidfdWait waits until the process of a pidfd terminates (pidfds of
// non-children become readable then); false at the timeout.
func pidfdWait(fd int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == nil && n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return !isAliveFD(fd)
		}
	}
}

// isAliveFD tells whether the process of a pidfd still exists.
func isAliveFD(fd int) bool {
	return unix.PidfdSendSignal(fd, 0, nil, 0) == nil
}

// ConmonAlive tells whether pid is a live conmon process for container id.
func ConmonAlive(pid int, id string) bool { return ProcessAlive(pid) && isConmonOf(pid, id) }

// isConmonOf tells whether pid is a live conmon process for container id.
func isConmonOf(pid int, id string) bool {
	cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(cmd) == 0 {
		return false
	}
	args := bytes.Split(cmd, []byte{0})
	if !strings.Contains(filepath.Base(string(args[0])), "conmon") {
		return false
	}
	for _, a := range args {
		if string(a) == id {
			return true
		}
	}
	return false
}
