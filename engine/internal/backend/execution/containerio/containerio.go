// Package containerio is the engine's service for a container's streams and
// observations: its log, attaching to its standard streams through conmon,
// terminal resizing, resource statistics and its process table. It works on
// the records core.Containers keeps and the files conmon and the kernel
// write; handlers reach containers' files only through it.
package containerio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/logs"
	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/backend/execution/top"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/exec"
	"github.com/berth-project/berth/engine/internal/core"
)

// Service serves container streams and observations.
type Service struct {
	containers core.Containers
	cgroupRoot string

	// statsReader keeps the control files of the cgroups it samples open
	// (see stats.Handles).
	statsReader stats.Reader

	statsMu sync.Mutex
	// lastStats keeps each container's previous sample so CPU percentages
	// cover the time between two requests.
	lastStats map[string]stats.ContainerStats
	// sampled is the cgroup of each container whose files statsReader
	// holds open: they are closed when it stops or goes.
	sampled map[string]string
}

// New returns a Service over containers; cgroupRoot is the cgroup v1 mount
// ("" for /sys/fs/cgroup).
func New(containers core.Containers, cgroupRoot string) *Service {
	return &Service{containers: containers, cgroupRoot: cgroupRoot,
		statsReader: stats.Reader{Root: cgroupRoot, Handles: stats.NewHandles()},
		lastStats:   map[string]stats.ContainerStats{}, sampled: map[string]string{}}
}

// running reports whether a container's process is alive.
func running(s core.ContainerState) bool {
	return s == core.StateRunning || s == core.StatePaused
}

// exitWatch returns a channel closed when the container stops running (or
// is removed), and a function to stop watching.
func (s *Service) exitWatch(ctx context.Context, id string) (*core.Container, <-chan struct{}, func(), error) {
	done := make(chan struct{})
	var once sync.Once
	unsubscribe := s.containers.Subscribe(func(_ context.Context, ev core.ContainerEvent) {
		if ev.ID != id {
			return
		}
		switch ev.Type {
		case core.EventDied, core.EventStop, core.EventRemove, core.EventCleanup:
			once.Do(func() { close(done) })
		}
	})
	// Look after subscribing so an exit in between is not missed.
	c, err := s.containers.Lookup(ctx, id)
	if err != nil {
		unsubscribe()
		return nil, nil, nil, err
	}
	if !running(c.State) && c.State != core.StateCreated {
		once.Do(func() { close(done) })
	}
	return c, done, unsubscribe, nil
}

// LogOptions select log records.
type LogOptions struct {
	Since, Until time.Time
	Tail         int
	Follow       bool
}

// Logs delivers the container's log records to emit; with Follow it keeps
// going until the container stops or ctx ends.
func (s *Service) Logs(ctx context.Context, nameOrID string, opts LogOptions, emit func(logs.Line) error) error {
	c, err := s.containers.Lookup(ctx, nameOrID)
	if err != nil {
		return err
	}
	if err := c.LogsReadable(); err != nil {
		return err
	}
	readOpts := logs.Options{Since: opts.Since, Until: opts.Until, Tail: opts.Tail, Follow: opts.Follow}
	if opts.Follow {
		_, done, unsubscribe, err := s.exitWatch(ctx, c.ID)
		if err != nil {
			return err
		}
		defer unsubscribe()
		readOpts.Done = done
	}
	if c.Spec.LogDriver() == core.LogDriverJournald {
		return logs.Journal{}.Read(ctx, c.ID, readOpts, emit)
	}
	return logs.Read(ctx, c.LogPath, readOpts, emit)
}

// LogFrames is the emit function of a logs route, both front doors': it
// keeps the records of the streams wanted (stdout, stderr), prefixes each
// with its time where stamp is set (stamp appends it to a frame), ends it
// with a newline unless it is partial, and hands it to write with the
// stream it came from (stream.Stdout or stream.Stderr). The frame is
// reused from one record to the next.
func LogFrames(stdout, stderr bool, stamp func(frame []byte, t time.Time) []byte, write func(id byte, frame []byte) error) func(logs.Line) error {
	var frame []byte
	return func(l logs.Line) error {
		id := stream.Stdout
		if l.Stream == logs.Stderr {
			if !stderr {
				return nil
			}
			id = stream.Stderr
		} else if !stdout {
			return nil
		}
		frame = frame[:0]
		if stamp != nil {
			frame = append(stamp(frame, l.Time), ' ')
		}
		frame = append(frame, l.Text...)
		if !l.Partial {
			frame = append(frame, '\n')
		}
		return write(id, frame)
	}
}

// replayLog writes what a container logged so far to an attach's
// writers, as an attach with logs=true sends it before the live streams
// (both front doors do): every record a line of its own unless partial,
// stderr's records on stdout with a terminal, a stream with a nil writer
// left out. logsOf is the service's Logs (or what stands for it).
func replayLog(ctx context.Context, logsOf func(ctx context.Context, nameOrID string, opts LogOptions, emit func(logs.Line) error) error, nameOrID string, tty bool, stdout, stderr io.Writer) error {
	// A container that keeps no log (driver none) has none to replay.
	err := logsOf(ctx, nameOrID, LogOptions{Tail: -1}, func(l logs.Line) error {
		dst := stdout
		if l.Stream == logs.Stderr && !tty {
			dst = stderr
		}
		if dst == nil {
			return nil
		}
		text := l.Text
		if !l.Partial {
			text = append(text, '\n')
		}
		_, err := dst.Write(text)
		return err
	})
	if errors.Is(err, core.ErrLogsNotKept) {
		return nil
	}
	return err
}

// Hijacked is an attach over a hijacked connection, as both front doors
// serve it.
type Hijacked struct {
	// TTY: the container has a terminal (raw bytes; else multiplexed
	// frames).
	TTY bool
	// Stdin, Stdout, Stderr: the streams the client asked for.
	Stdin, Stdout, Stderr bool
	// ReplayLog: send what the container logged so far first.
	ReplayLog bool
	// DetachKeys end the session when the client types them.
	DetachKeys []byte
}

// ServeHijacked joins a hijacked connection (rw) to a container: the
// writers its terminal calls for (stream.Outputs), the log so far when
// h.ReplayLog (logsOf reads the log of nameOrID), then the live streams of
// sess (none when sess is nil) until the container's streams end or the
// client detaches, which is no error. It flushes rw at the end.
func ServeHijacked(ctx context.Context, rw *bufio.ReadWriter, sess *Session, logsOf func(ctx context.Context, nameOrID string, opts LogOptions, emit func(logs.Line) error) error, nameOrID string, h Hijacked) error {
	stdout, stderr, _ := stream.Outputs(rw.Writer, h.TTY, h.Stdout, h.Stderr)
	if h.ReplayLog {
		if err := replayLog(ctx, logsOf, nameOrID, h.TTY, stdout, stderr); err != nil {
			return fmt.Errorf("replaying logs: %w", err)
		}
	}
	if sess == nil {
		return nil
	}
	streams := AttachStreams{Stdout: stdout, Stderr: stderr, DetachKeys: h.DetachKeys}
	if h.Stdin {
		streams.Stdin = rw.Reader
	}
	err := sess.Run(streams)
	_ = rw.Flush()
	if errors.Is(err, stream.ErrDetach) {
		return nil
	}
	return err
}

// Session is an open attach connection to a container's conmon.
type Session struct {
	Container *core.Container
	conn      *net.UnixConn
	svc       *Service
}

// Attach prepares a container for attaching, as Podman does: a container
// that is configured, stopped or exited is initialised again (conmon and the
// runtime's instance exist, the process waits for start); then it connects
// to conmon's attach socket. Errors here come before any byte is sent to
// the client.
func (s *Service) Attach(ctx context.Context, nameOrID string) (*Session, error) {
	c, err := s.containers.Lookup(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	switch c.State {
	case core.StateConfigured, core.StateExited, core.StateStopped:
		if err := s.containers.Init(ctx, c.ID); err != nil {
			return nil, fmt.Errorf("preparing container %s for attach: %w", c.ID, err)
		}
		if c, err = s.containers.Lookup(ctx, c.ID); err != nil {
			return nil, err
		}
	case core.StateCreated, core.StateRunning:
	default:
		return nil, fmt.Errorf("can only attach to created or running containers, %s is %s: %w", c.ID, c.State, core.ErrStateConflict)
	}
	if c.PauseProcess {
		// No conmon serves it.
		return nil, fmt.Errorf("container %s is its pod's pause process, which has no stdio to attach to: %w", c.ID, core.ErrStateConflict)
	}
	conn, err := stream.DialAttach(c.AttachSocket)
	if err != nil {
		return nil, err
	}
	return &Session{Container: c, conn: conn, svc: s}, nil
}

// AttachStreams are the client's ends; nil members are not attached.
type AttachStreams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// DetachKeys end the session (the container keeps running) when the
	// client types them; empty disables detaching.
	DetachKeys []byte
	// StdinDone, when not nil, is called once the client's input ended.
	StdinDone func()
}

// Close drops the connection to conmon.
func (a *Session) Close() error { return a.conn.Close() }

// Run copies between the client and the container until the container's
// streams end (it exited), the client detaches (stream.ErrDetach), or
// writing to the client fails.
func (a *Session) Run(streams AttachStreams) error {
	outDone := make(chan error, 1)
	go func() {
		outDone <- stream.CopyFromConmon(a.conn, stream.Output{Stdout: streams.Stdout, Stderr: streams.Stderr})
	}()
	inDone := make(chan error, 1)
	if streams.Stdin != nil {
		go func() {
			_, err := stream.CopyDetachable(a.conn, streams.Stdin, streams.DetachKeys)
			inDone <- err
		}()
	}
	for {
		select {
		case err := <-outDone:
			return err
		case err := <-inDone:
			if errors.Is(err, stream.ErrDetach) {
				// Closing the socket ends the output copy; wait for it so
				// nothing writes to the client after Run returns.
				a.conn.Close()
				<-outDone
				return err
			}
			// The client's input ended: conmon closes the container's
			// stdin when its writer half-closes; output keeps flowing.
			_ = a.conn.CloseWrite()
			if streams.StdinDone != nil {
				streams.StdinDone()
			}
			inDone = nil
		}
	}
}

// Resize sets the terminal size of a container started with a terminal.
func (s *Service) Resize(ctx context.Context, nameOrID string, height, width uint16) error {
	c, err := s.containers.Lookup(ctx, nameOrID)
	if err != nil {
		return err
	}
	if c.State != core.StateCreated && c.State != core.StateRunning {
		return fmt.Errorf("container %s is %s, cannot resize its terminal: %w", c.ID, c.State, core.ErrStateConflict)
	}
	if !c.Spec.Terminal {
		return fmt.Errorf("container %s has no terminal: %w", c.ID, core.ErrStateConflict)
	}
	return stream.ResizeTerminal(filepath.Join(c.Bundle, "ctl"), height, width)
}

// Stats samples the named containers, or every running one when none is
// named. A named container that is not running reports zero usage; one
// without a cgroup of its own (cgroups_mode disabled) has no usage to
// report: named, it is a 409 (as Podman answers), and the listing of
// every container leaves it out rather than show it at zero.
func (s *Service) Stats(ctx context.Context, nameOrIDs []string) ([]stats.ContainerStats, error) {
	var targets []*core.Container
	if len(nameOrIDs) == 0 {
		all, err := s.runningContainers(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range all {
			if running(c.State) && !c.NoCgroup() {
				targets = append(targets, c)
			}
		}
	} else {
		for _, n := range nameOrIDs {
			c, err := s.containers.Lookup(ctx, n)
			if err != nil {
				return nil, err
			}
			if c.NoCgroup() {
				return nil, noCgroupStats(c)
			}
			targets = append(targets, c)
		}
	}
	// Each container's cgroup files are read apart from the others': a
	// few at a time, so that the kernel's work (cgroup v2 flushes its
	// per-CPU counters on every read of cpu.stat, memory.stat, io.stat)
	// runs on every CPU instead of one after another.
	//
	// The workers (this goroutine one of them) take the next container
	// from a shared counter: no hand-off through a channel per container,
	// which wakes a goroutine each time (in the host lab's emulated VM a
	// futex call is dear).
	samples := make([]stats.Sample, len(targets))
	errs := make([]error, len(targets))
	reader := s.statsReader
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < len(targets); i = int(next.Add(1) - 1) {
			if c := targets[i]; running(c.State) {
				pid := c.PID
				if c.Spec.NetNS.NSMode == core.NetNSNone {
					// Only loopback, whose traffic is not counted:
					// nothing to read.
					pid = 0
				}
				samples[i], errs[i] = reader.Read(c.CgroupPath, pid)
			}
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < min(statsWorkers(), len(targets)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	out := make([]stats.ContainerStats, 0, len(targets))
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	s.noteSampled(targets, len(nameOrIDs) == 0)
	for i, c := range targets {
		if !running(c.State) || errors.Is(errs[i], stats.ErrNoCgroup) {
			out = append(out, stats.ContainerStats{ContainerID: c.ID, Name: c.Name})
			continue
		}
		if errs[i] != nil {
			return nil, fmt.Errorf("stats of container %s: %w", c.ID, errs[i])
		}
		prev, ok := s.lastStats[c.ID]
		var prevPtr *stats.ContainerStats
		if ok {
			prevPtr = &prev
		}
		cur := stats.Compute(c.ID, c.Name, c.StartedAt, samples[i], prevPtr)
		s.lastStats[c.ID] = cur
		out = append(out, cur)
	}
	return out, nil
}

// runningLister is what a Containers implementation may offer to list its
// running containers with their records in one step (the containers
// backend does); Stats of every container then skips List's rows and a
// Lookup per row.
type runningLister interface {
	Running(ctx context.Context) []*core.Container
}

// runningContainers returns the running (and paused) containers, newest
// first.
func (s *Service) runningContainers(ctx context.Context) ([]*core.Container, error) {
	if rl, ok := s.containers.(runningLister); ok {
		return rl.Running(ctx), nil
	}
	list, err := s.containers.List(ctx, core.ListContainersOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*core.Container, 0, len(list))
	for _, row := range list {
		if c, err := s.containers.Lookup(ctx, row.ID); err == nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// noCgroupStats is the error of stats of a container without a cgroup.
func noCgroupStats(c *core.Container) error {
	return fmt.Errorf("cannot read the stats of container %s as it did not create a cgroup: %w", c.ID, core.ErrNoCgroup)
}

// noteSampled records the cgroups whose files the reader now holds open;
// after a sample of every running container (all), the files of any other
// cgroup are closed. The caller holds statsMu.
func (s *Service) noteSampled(targets []*core.Container, all bool) {
	seen := make(map[string]bool, len(targets))
	for _, c := range targets {
		if !running(c.State) || c.CgroupPath == "" {
			continue
		}
		seen[c.ID] = true
		if old, ok := s.sampled[c.ID]; ok && old != c.CgroupPath {
			s.statsReader.Forget(old)
		}
		s.sampled[c.ID] = c.CgroupPath
	}
	if !all {
		return
	}
	for id, path := range s.sampled {
		if !seen[id] {
			s.statsReader.Forget(path)
			delete(s.sampled, id)
		}
	}
}

// statsWorkers is how many containers Stats samples at once.
func statsWorkers() int {
	return max(2, goruntime.NumCPU())
}

// DockerStats samples one running container in the Docker-compatible shape;
// prev is the previous report of the same stream (nil for the first).
func (s *Service) DockerStats(ctx context.Context, nameOrID string, prev *stats.DockerStats) (*stats.DockerStats, error) {
	c, err := s.containers.Lookup(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	if c.NoCgroup() {
		return nil, noCgroupStats(c)
	}
	if !running(c.State) {
		return nil, fmt.Errorf("container %s is %s, it has no stats: %w", c.ID, c.State, core.ErrStateConflict)
	}
	reader := s.statsReader
	reader.Docker = true // Docker's memory_stats: usage from memory.current, max_usage
	sample, err := reader.Read(c.CgroupPath, c.PID)
	s.statsMu.Lock()
	s.noteSampled([]*core.Container{c}, false)
	s.statsMu.Unlock()
	if errors.Is(err, stats.ErrNoCgroup) {
		return nil, fmt.Errorf("container %s has no cgroup: %w", c.ID, core.ErrStateConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("stats of container %s: %w", c.ID, err)
	}
	var prevStats *stats.ContainerStats
	if prev != nil {
		prevStats = &stats.ContainerStats{CPUNano: prev.CPUStats.CPUUsage.TotalUsage, SystemNano: uint64(prev.Read.UnixNano())}
	}
	cs := stats.Compute(c.ID, c.Name, c.StartedAt, sample, prevStats)
	d := stats.Docker(cs, sample, prev)
	return &d, nil
}

// Top lists the processes of a running container. Descriptors top does not
// know are taken as ps(1) options and run as ps inside the container, as
// Podman does; its lines come back whole.
func (s *Service) Top(ctx context.Context, nameOrID string, psArgs []string) (*top.Result, error) {
	descs, descErr := top.ParseDescriptors(psArgs)
	if descErr != nil && !errors.Is(descErr, top.ErrUnknownDescriptor) {
		return nil, core.InvalidArgument("ps_args", descErr)
	}
	c, err := s.topTarget(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	if !running(c.State) {
		return nil, fmt.Errorf("top can only be used on running containers, %s is %s: %w", c.ID, c.State, core.ErrStateConflict)
	}
	if descErr == nil {
		return top.List(top.Options{CgroupRoot: s.cgroupRoot, CgroupPath: c.CgroupPath, Rootfs: c.Rootfs}, descs)
	}
	// podman joins its arguments with commas: "-o,pid,args" is "-o pid,args".
	var args []string
	for _, a := range psArgs {
		for _, f := range strings.Fields(a) {
			if opt, rest, ok := strings.Cut(f, ","); ok && strings.HasPrefix(opt, "-") && rest != "" {
				args = append(args, opt, rest)
				continue
			}
			args = append(args, f)
		}
	}
	res, err := s.psInContainer(ctx, c, args)
	if err != nil {
		return nil, core.InvalidArgument("ps_args", fmt.Errorf("%w, and ps(1) in the container failed: %w", descErr, err))
	}
	return res, nil
}

// HostTop lists a running container's processes as Docker's top does:
// ps(1) with psArgs ("-ef" when empty) run on the host, its lines of the
// container's processes (host PIDs).
func (s *Service) HostTop(ctx context.Context, nameOrID, psArgs string) (*top.Result, error) {
	if err := top.CheckHostPSArgs(psArgs); err != nil {
		return nil, core.InvalidArgument("ps_args", err)
	}
	c, err := s.topTarget(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	if !running(c.State) {
		return nil, fmt.Errorf("Container %s is not running: %w", c.ID, core.ErrStateConflict)
	}
	res, err := top.HostPS(ctx, top.Options{CgroupRoot: s.cgroupRoot, CgroupPath: c.CgroupPath}, psArgs)
	if errors.Is(err, top.ErrNoPIDColumn) {
		return nil, core.InvalidArgument("ps_args", err)
	}
	return res, err
}

// topTarget is the container a top lists, which must have a cgroup of its
// own to find its processes by.
func (s *Service) topTarget(ctx context.Context, nameOrID string) (*core.Container, error) {
	c, err := s.containers.Lookup(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	if c.NoCgroup() {
		return nil, fmt.Errorf("cannot run top on container %s as it did not create a cgroup: %w", c.ID, core.ErrNoCgroup)
	}
	return c, nil
}

// maxPSOutput bounds what ps(1) may print.
const maxPSOutput = 1 << 20

// psInContainer runs ps with args inside c and returns its lines, leaving
// out the ps process itself.
func (s *Service) psInContainer(ctx context.Context, c *core.Container, args []string) (*top.Result, error) {
	out, errOut := exec.CappedOutput{Limit: maxPSOutput}, exec.CappedOutput{Limit: maxPSOutput}
	p, err := s.containers.Exec(ctx, c.ID, core.ExecRequest{
		Process: exec.ProcessFor(c, append([]string{"ps"}, args...), false),
		Stdout:  &out,
		Stderr:  &errOut,
	})
	if err != nil {
		return nil, err
	}
	code, err := p.Wait()
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("ps exited with %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	self := strings.Join(append([]string{"ps"}, args...), " ")
	res := &top.Result{Titles: []string{lines[0]}, Processes: [][]string{}}
	for _, line := range lines[1:] {
		if line == "" || strings.Contains(line, self) {
			continue
		}
		res.Processes = append(res.Processes, []string{line})
	}
	return res, nil
}

// Hook forgets what the service keeps about a container: the control files
// held open once it stops, its last sample once it is removed; register it
// with containers.Subscribe.
func (s *Service) Hook(_ context.Context, ev core.ContainerEvent) {
	switch ev.Type {
	case core.EventDied, core.EventStop, core.EventRemove:
	default:
		return
	}
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if path, ok := s.sampled[ev.ID]; ok {
		s.statsReader.Forget(path)
		delete(s.sampled, ev.ID)
	}
	if ev.Type == core.EventRemove {
		delete(s.lastStats, ev.ID)
	}
}
