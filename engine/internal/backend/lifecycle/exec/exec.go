// Package exec manages exec sessions: processes started inside running
// containers on a client's request (podman exec). A session is created,
// started once (detached or attached to the caller's streams), and keeps its
// exit code for inspection. Sessions are persisted in the state database.
package exec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/rootfs"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// Config is what a client asks for when creating a session (Docker's
// ExecConfig as Podman sends it).
type Config struct {
	Cmd          []string `json:"Cmd"`
	Env          []string `json:"Env"`
	WorkingDir   string   `json:"WorkingDir"`
	User         string   `json:"User"`
	Tty          bool     `json:"Tty"`
	Privileged   bool     `json:"Privileged"`
	AttachStdin  bool     `json:"AttachStdin"`
	AttachStdout bool     `json:"AttachStdout"`
	AttachStderr bool     `json:"AttachStderr"`
	DetachKeys   string   `json:"DetachKeys"`
	// UserAtStart looks User up when the session starts rather than at
	// its creation, as dockerd does: a user or group the container lacks
	// fails the start (exit code 126, a StartError of the lookup) instead
	// of the creation. The Docker API sets it.
	UserAtStart bool `json:"userAtStart,omitempty"`
}

// Session is the stored state of one exec session.
type Session struct {
	ID          string    `json:"id"`
	ContainerID string    `json:"containerId"`
	Config      Config    `json:"config"`
	Created     time.Time `json:"created"`
	Started     bool      `json:"started"`
	Running     bool      `json:"running"`
	Pid         int       `json:"pid"`
	ExitCode    int       `json:"exitCode"`
	Exited      time.Time `json:"exited"`
	// StartFailed says the process never ran: the runtime could not start
	// it. ExitCode is then a shell's code for the reason (Podman's 127 or
	// 126); the Docker API reports dockerd's 126 for every such failure.
	StartFailed bool `json:"startFailed,omitempty"`
}

// Inspect is a session in Podman's InspectExecSession shape.
type Inspect struct {
	CanRemove     bool            `json:"CanRemove"`
	ContainerID   string          `json:"ContainerID"`
	DetachKeys    string          `json:"DetachKeys"`
	ExitCode      int             `json:"ExitCode"`
	ID            string          `json:"ID"`
	OpenStderr    bool            `json:"OpenStderr"`
	OpenStdin     bool            `json:"OpenStdin"`
	OpenStdout    bool            `json:"OpenStdout"`
	Running       bool            `json:"Running"`
	Pid           int             `json:"Pid"`
	ProcessConfig *InspectProcess `json:"ProcessConfig"`
}

// InspectProcess describes the session's process.
type InspectProcess struct {
	Arguments  []string `json:"arguments"`
	Entrypoint string   `json:"entrypoint"`
	Privileged bool     `json:"privileged"`
	Tty        bool     `json:"tty"`
	User       string   `json:"user"`
}

// Streams connect an attached session to its client; nil members are not
// attached.
type Streams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Store persists sessions; *state.DB implements it.
type Store interface {
	PutExecSession(ctx context.Context, r state.ExecSessionRecord) error
	GetExecSession(ctx context.Context, id string) (state.ExecSessionRecord, error)
	ListExecSessions(ctx context.Context, containerID string) ([]state.ExecSessionRecord, error)
	DeleteExecSession(ctx context.Context, id string) error
}

// SessionRetention is how long an ended session stays inspectable (Podman
// removes exec sessions five minutes after they exit).
const SessionRetention = 5 * time.Minute

// Notifier is told when sessions start and end (the event bus).
type Notifier interface {
	ExecEvent(ctx context.Context, c *core.Container, sessionID string, command []string, status string, exitCode int)
}

// Manager creates, runs and remembers exec sessions.
type Manager struct {
	containers core.Containers
	store      Store
	notify     Notifier
	logger     *slog.Logger

	// retention is how long ended sessions are kept (SessionRetention
	// unless set).
	retention time.Duration

	mu   sync.Mutex
	live map[string]*Started
	// ended lists the sessions that ended, oldest first, so that pruning
	// touches only the sessions past retention: exec create stays O(1) in
	// the number of sessions kept for inspection.
	ended []endedSession
}

// endedSession is one entry of Manager.ended.
type endedSession struct {
	id     string
	exited time.Time
}

// NewManager returns a Manager. notify may be nil.
func NewManager(containers core.Containers, store Store, notify Notifier, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{containers: containers, store: store, notify: notify, logger: logger, retention: SessionRetention, live: map[string]*Started{}}
}

// SetRetention changes how long ended sessions stay inspectable; d <= 0
// keeps Podman's SessionRetention. Call it before the manager serves.
func (m *Manager) SetRetention(d time.Duration) {
	if d > 0 {
		m.retention = d
	}
}

// Recover marks sessions that were running when the engine stopped as ended
// (their processes are no longer attached to this engine) and queues every
// ended session for pruning.
func (m *Manager) Recover(ctx context.Context) error {
	records, err := m.store.ListExecSessions(ctx, "")
	if err != nil {
		return err
	}
	var ended []endedSession
	for _, r := range records {
		var s Session
		if err := json.Unmarshal(r.Data, &s); err != nil || !s.Started {
			continue
		}
		if s.Running {
			s.Running = false
			s.Pid = 0
			s.ExitCode = -1
			s.Exited = time.Now()
			if err := m.put(ctx, &s); err != nil {
				return err
			}
		}
		ended = append(ended, endedSession{id: s.ID, exited: s.Exited})
	}
	sort.Slice(ended, func(i, j int) bool { return ended[i].exited.Before(ended[j].exited) })
	m.mu.Lock()
	m.ended = append(ended, m.ended...)
	m.mu.Unlock()
	return nil
}

// Create validates cfg and stores a new session for a running container.
func (m *Manager) Create(ctx context.Context, nameOrID string, cfg Config) (string, error) {
	if len(cfg.Cmd) == 0 || cfg.Cmd[0] == "" {
		return "", core.InvalidArgument("Cmd", errors.New("a command is required"))
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return "", core.InvalidArgument("Env", fmt.Errorf("%q must be KEY=value", kv))
		}
	}
	if cfg.User != "" {
		if _, _, err := rootfs.ParseUserSpec(cfg.User); err != nil {
			return "", core.InvalidArgument("User", err)
		}
	}
	c, err := m.containers.Lookup(ctx, nameOrID)
	if err != nil {
		return "", err
	}
	if c.State == core.StatePaused {
		return "", fmt.Errorf("cannot create exec session as container %s is paused: %w", c.ID, core.ErrStateConflict)
	}
	if c.State != core.StateRunning {
		return "", fmt.Errorf("container %s is %s, not running: %w", c.ID, c.State, core.ErrStateConflict)
	}
	if c.PauseProcess {
		return "", fmt.Errorf("container %s is its pod's pause process, which runs nothing but catatonit: %w", c.ID, core.ErrStateConflict)
	}
	if cfg.User != "" && !cfg.UserAtStart {
		if _, _, err := rootfs.ResolveUser(c.Rootfs, cfg.User); err != nil {
			return "", core.InvalidArgument("User", err)
		}
	}
	m.pruneEnded(ctx)
	id, err := newID()
	if err != nil {
		return "", err
	}
	s := &Session{ID: id, ContainerID: c.ID, Config: cfg, Created: time.Now()}
	if err := m.put(ctx, s); err != nil {
		return "", err
	}
	return id, nil
}

// pruneEnded forgets the sessions that ended more than the retention
// ago, so repeated execs do not pile up. It looks only at those.
func (m *Manager) pruneEnded(ctx context.Context) {
	cutoff := time.Now().Add(-m.retention)
	m.mu.Lock()
	n := 0
	for n < len(m.ended) && m.ended[n].exited.Before(cutoff) {
		n++
	}
	expired := append([]endedSession(nil), m.ended[:n]...)
	m.ended = m.ended[n:]
	m.mu.Unlock()
	for _, s := range expired {
		if err := m.store.DeleteExecSession(ctx, s.id); err != nil && !errors.Is(err, state.ErrNotFound) {
			m.logger.Warn("removing ended exec session", "session", s.id, "err", err)
		}
	}
}

var _ core.ExecSessionLister = (*Manager)(nil)

// ExecSessionIDs lists the sessions the engine keeps of a container (until
// they are removed, or pruned a retention after they end) and those of them
// that have not ended, in the order they were created.
func (m *Manager) ExecSessionIDs(ctx context.Context, containerID string) (kept, live []string, err error) {
	records, err := m.store.ListExecSessions(ctx, containerID)
	if err != nil {
		return nil, nil, err
	}
	sessions := make([]Session, 0, len(records))
	for _, r := range records {
		var s Session
		if json.Unmarshal(r.Data, &s) == nil {
			sessions = append(sessions, s)
		}
	}
	sort.SliceStable(sessions, func(i, j int) bool { return sessions[i].Created.Before(sessions[j].Created) })
	kept, live = []string{}, []string{}
	for _, s := range sessions {
		kept = append(kept, s.ID)
		if s.Exited.IsZero() {
			live = append(live, s.ID)
		}
	}
	return kept, live, nil
}

// Get returns a stored session.
func (m *Manager) Get(ctx context.Context, id string) (*Session, error) {
	r, err := m.store.GetExecSession(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("exec session %s: %w", id, core.ErrNoSuchExecSession)
	}
	if err != nil {
		return nil, err
	}
	var s Session
	if err := json.Unmarshal(r.Data, &s); err != nil {
		return nil, fmt.Errorf("decode exec session %s: %w", id, err)
	}
	return &s, nil
}

// Inspect returns a session in Podman's shape.
func (m *Manager) Inspect(ctx context.Context, id string) (*Inspect, error) {
	s, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	keys := s.Config.DetachKeys
	out := &Inspect{
		CanRemove:   !s.Running,
		ContainerID: s.ContainerID,
		DetachKeys:  keys,
		ExitCode:    s.ExitCode,
		ID:          s.ID,
		OpenStderr:  s.Config.AttachStderr || s.Config.Tty,
		OpenStdin:   s.Config.AttachStdin,
		OpenStdout:  s.Config.AttachStdout || s.Config.Tty,
		Running:     s.Running,
		Pid:         s.Pid,
		ProcessConfig: &InspectProcess{
			Entrypoint: s.Config.Cmd[0],
			Arguments:  append([]string{}, s.Config.Cmd[1:]...),
			Privileged: s.Config.Privileged,
			Tty:        s.Config.Tty,
			User:       s.Config.User,
		},
	}
	return out, nil
}

// Started is returned by Start once the process runs.
type Started struct {
	session *Session
	proc    core.ExecProcess
	m       *Manager
	c       *core.Container
	done    chan struct{}
	code    int
	err     error
}

// Wait blocks until the process exited and its exit code is stored.
func (s *Started) Wait() (int, error) {
	<-s.done
	return s.code, s.err
}

// Start runs the session's process attached to streams. It returns once the
// process started; Started.Wait reports its end. A session starts only once.
// The size, when not nil, is applied to the terminal before the command runs.
func (m *Manager) Start(ctx context.Context, id string, streams Streams, size *[2]uint16) (*Started, error) {
	s, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.Started {
		return nil, fmt.Errorf("exec session %s has already been started: %w", id, core.ErrStateConflict)
	}
	c, err := m.containers.Lookup(ctx, s.ContainerID)
	if err != nil {
		return nil, err
	}
	if c.State != core.StateRunning {
		return nil, fmt.Errorf("cannot exec in a container that is not running; container %s is %s: %w", c.ID, c.State, core.ErrStateConflict)
	}
	proc := ProcessFor(c, s.Config.Cmd, s.Config.Tty)
	if len(s.Config.Env) > 0 {
		proc.Env = mergeEnv(proc.Env, s.Config.Env)
	}
	if s.Config.WorkingDir != "" {
		proc.Cwd = s.Config.WorkingDir
	}
	if err := execGroups(c, s.Config.User, &proc); err != nil {
		if !s.Config.UserAtStart {
			return nil, err
		}
		// dockerd's words are the lookup's (runc's user package), which
		// oci.ResolveUser wraps as a field error naming the user.
		var fe *core.FieldError
		if _, lerr := oci.ResolveUser(c.Rootfs, s.Config.User, nil); errors.As(lerr, &fe) {
			if inner := errors.Unwrap(fe.Err); inner != nil {
				err = inner
			}
		}
		s.Started, s.ExitCode, s.Exited, s.StartFailed = true, 126, time.Now(), true
		if perr := m.put(ctx, s); perr != nil {
			m.logger.Error("storing exec session", "session", id, "err", perr)
		}
		return nil, &StartError{Code: 126, Err: err, Lookup: true}
	}
	if size != nil && s.Config.Tty && size[0] > 0 && size[1] > 0 {
		// The terminal has its size before the command reads it.
		proc.ConsoleSize = &specs.Box{Height: uint(size[0]), Width: uint(size[1])}
	}
	req := core.ExecRequest{Process: proc, Privileged: s.Config.Privileged}
	if s.Config.AttachStdin {
		req.Stdin = streams.Stdin
	}
	if s.Config.AttachStdout || s.Config.Tty {
		req.Stdout = streams.Stdout
	}
	if s.Config.AttachStderr && !s.Config.Tty {
		req.Stderr = streams.Stderr
	}
	// The process outlives the request that started it (detached sessions).
	p, err := m.containers.Exec(context.WithoutCancel(ctx), c.ID, req)
	if err != nil {
		if errors.Is(err, core.ErrStateConflict) || errors.Is(err, core.ErrNoSuchContainer) || errors.Is(err, core.ErrInvalidArgument) {
			return nil, err
		}
		// The process never ran: the session ends with the exit code a
		// shell would give (127 not found, 126 not executable).
		code := startFailureCode(err)
		s.Started, s.Running, s.ExitCode, s.Exited, s.StartFailed = true, false, code, time.Now(), true
		if perr := m.put(ctx, s); perr != nil {
			m.logger.Error("storing exec session", "session", id, "err", perr)
		}
		return nil, &StartError{Code: code, Err: err}
	}
	s.Started, s.Running, s.Pid = true, true, p.Pid()
	if err := m.put(ctx, s); err != nil {
		m.logger.Error("storing exec session", "session", id, "err", err)
	}
	st := &Started{session: s, proc: p, m: m, c: c, done: make(chan struct{})}
	m.mu.Lock()
	m.live[id] = st
	m.mu.Unlock()
	if m.notify != nil {
		m.notify.ExecEvent(ctx, c, id, s.Config.Cmd, "exec", 0)
	}
	go st.finish()
	return st, nil
}

func (s *Started) finish() {
	defer close(s.done)
	code, err := s.proc.Wait()
	if err != nil {
		s.m.logger.Warn("exec session ended with an error", "session", s.session.ID, "err", err)
		if code == 0 {
			code = 126
		}
	}
	s.session.Running = false
	s.session.Pid = 0
	s.session.ExitCode = code
	s.session.Exited = time.Now()
	s.m.mu.Lock()
	delete(s.m.live, s.session.ID)
	s.m.ended = append(s.m.ended, endedSession{id: s.session.ID, exited: s.session.Exited})
	s.m.mu.Unlock()
	ctx := context.Background()
	if perr := s.m.put(ctx, s.session); perr != nil {
		s.m.logger.Error("storing exec session", "session", s.session.ID, "err", perr)
	}
	if s.m.notify != nil {
		s.m.notify.ExecEvent(ctx, s.c, s.session.ID, s.session.Config.Cmd, "exec_died", code)
	}
	s.code, s.err = code, err
}

// Resize changes the terminal size of a running session.
func (m *Manager) Resize(ctx context.Context, id string, height, width uint16) error {
	s, err := m.Get(ctx, id)
	if err != nil {
		return err
	}
	m.mu.Lock()
	st := m.live[id]
	m.mu.Unlock()
	if st == nil || !s.Running {
		return fmt.Errorf("exec session %s is not running: %w", id, core.ErrStateConflict)
	}
	if !s.Config.Tty {
		return fmt.Errorf("exec session %s has no terminal: %w", id, core.ErrStateConflict)
	}
	return st.proc.Resize(width, height)
}

// Remove forgets a session before its retention ends (podman 4.8 and
// later remove each session they ran). A running session is removed only
// with force: its process is killed first and its end recorded.
func (m *Manager) Remove(ctx context.Context, id string, force bool) error {
	if _, err := m.Get(ctx, id); err != nil {
		return err
	}
	m.mu.Lock()
	st := m.live[id]
	m.mu.Unlock()
	if st != nil {
		if !force {
			return fmt.Errorf("exec session %s is running: stop it or remove it with force: %w", id, core.ErrStateConflict)
		}
		if err := st.proc.Signal(syscall.SIGKILL); err != nil {
			m.logger.Warn("killing exec session", "session", id, "err", err)
		}
		// Its end is stored before the record goes, not after.
		select {
		case <-st.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// An entry left in m.ended finds the record gone when it expires.
	if err := m.store.DeleteExecSession(ctx, id); err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	return nil
}

func (m *Manager) put(ctx context.Context, s *Session) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	err = m.store.PutExecSession(context.WithoutCancel(ctx), state.ExecSessionRecord{ID: s.ID, ContainerID: s.ContainerID, Created: s.Created, Data: data})
	if errors.Is(err, state.ErrNotFound) {
		return core.NoSuchContainer(s.ContainerID)
	}
	return err
}

// StartError is returned by Start when the process could not be started;
// the session is stored as exited with Code.
type StartError struct {
	Code int
	Err  error
	// Lookup: the exec's user or group was not found (UserAtStart);
	// nothing reached the runtime.
	Lookup bool
}

// Error is the runtime's reason.
func (e *StartError) Error() string { return e.Err.Error() }

// Unwrap exposes the runtime's error.
func (e *StartError) Unwrap() error { return e.Err }

// startFailureCode maps a runtime start failure to a shell's exit code.
func startFailureCode(err error) int {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "not found"), strings.Contains(msg, "no such file"):
		return 127
	case strings.Contains(msg, "permission denied"):
		return 126
	default:
		return 125
	}
}

func newID() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// execGroups sets the user and supplementary groups of an exec's process
// as Podman's exec gives them: the groups the container's /etc/group lists
// the user in (the exec's user, or the container's, looked up by its UID),
// and for the container's user the groups its request added (--group-add);
// not the primary group the container's own process holds as a
// supplementary one too. A container made through Docker's API
// (DockerGroups) gives its execs dockerd's: the primary group, the member
// groups and the container's extra groups, whatever the user.
func execGroups(c *core.Container, userSpec string, proc *specs.Process) error {
	var extra []uint32
	if userSpec == "" || c.Spec.DockerGroups {
		groups := slices.DeleteFunc(slices.Clone(c.Spec.Groups), func(g string) bool { return g == core.KeepGroups })
		var err error
		if extra, err = oci.GroupIDs(c.Rootfs, groups); err != nil {
			return err
		}
	}
	if userSpec != "" {
		uid, gid, err := rootfs.ResolveUser(c.Rootfs, userSpec)
		if err != nil {
			return core.InvalidArgument("User", err)
		}
		proc.User = specs.User{UID: uid, GID: gid}
	}
	lookup := userSpec
	if lookup == "" {
		lookup = strconv.FormatUint(uint64(proc.User.UID), 10)
	}
	var members []uint32
	if eu, err := oci.ResolveUser(c.Rootfs, lookup, nil); err == nil {
		members = oci.MemberGroups(lookup, eu)
	}
	if c.Spec.DockerGroups {
		// dockerd's exec: the primary group first, and the container's
		// extra groups with any user.
		members = oci.AppendNew([]uint32{proc.User.GID}, members...)
	}
	proc.User.AdditionalGids = oci.AppendNew(members, extra...)
	return nil
}

// ProcessFor returns the process an exec of args in c runs: the container's
// own process settings (environment, working directory, user, capabilities,
// rlimits) read from its OCI bundle, with the new arguments and terminal
// choice. Where the bundle is unreadable, only the container's environment
// from its creation request is kept.
func ProcessFor(c *core.Container, args []string, tty bool) specs.Process {
	var proc specs.Process
	if data, err := os.ReadFile(filepath.Join(c.Bundle, "config.json")); err == nil {
		var spec specs.Spec
		if json.Unmarshal(data, &spec) == nil && spec.Process != nil {
			proc = *spec.Process
		}
	}
	if len(proc.Env) == 0 {
		proc.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		for k, v := range c.Spec.Env {
			proc.Env = append(proc.Env, k+"="+v)
		}
	}
	if proc.Cwd == "" {
		proc.Cwd = "/"
	}
	proc.Args = append([]string(nil), args...)
	proc.Terminal = tty
	proc.ConsoleSize = nil
	if tty {
		proc.Env = mergeEnv(proc.Env, []string{"TERM=xterm"})
	} else if c.Spec.DockerEnv && c.Spec.Terminal && !setByUser(c, "TERM") {
		// dockerd gives TERM to a terminal's processes only: an exec
		// without one in a container with one has none.
		proc.Env = slices.DeleteFunc(proc.Env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") })
	}
	return proc
}

// setByUser tells whether c's request or its image set the variable name.
func setByUser(c *core.Container, name string) bool {
	if _, ok := c.Spec.Env[name]; ok {
		return true
	}
	return slices.ContainsFunc(c.ImageEnv, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// mergeEnv overrides base with extra, key by key.
func mergeEnv(base, extra []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range append(append([]string{}, base...), extra...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
