package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"golang.org/x/sys/unix"
)

// Exec runs req.Process inside the running container c with "runtime exec".
// The runtime process stays the parent of the new process, so Wait returns
// its exit code. With a terminal, runc runs on a pseudo-terminal the engine
// holds the master of.
func (r *Runtime) Exec(ctx context.Context, c *core.Container, req core.ExecRequest) (core.ExecProcess, error) {
	if len(req.Process.Args) == 0 {
		return nil, core.InvalidArgument("Cmd", errors.New("a command is required"))
	}
	if r.isPause(c.ID) {
		return nil, errPause("exec", c.ID)
	}
	dir, err := os.MkdirTemp(c.Bundle, "exec-")
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	p := &execProcess{dir: dir, done: make(chan struct{})}
	fail := func(err error) (core.ExecProcess, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	procFile := filepath.Join(dir, "process.json")
	data, err := json.Marshal(req.Process)
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(procFile, data, 0o600); err != nil {
		return fail(err)
	}
	pidFile := filepath.Join(dir, "pid")
	// JSON log lines, so that runc's own error is told apart from text.
	args := []string{"--root", r.stateRoot}
	if r.NoCgroup(c.ID) {
		args = append(args, noCgroupArgs...)
	}
	args = append(args, "--log-format", "json", "exec", "--process", procFile, "--pid-file", pidFile)
	// With a terminal, runc (not detached) needs a terminal as its own
	// stdio: it allocates the container's console, copies between the two
	// and follows our terminal's size on SIGWINCH. runc refuses a console
	// socket unless it detaches, which would lose the exit code.
	var master, slave *os.File
	if req.Process.Terminal {
		if master, slave, err = openPty(); err != nil {
			return fail(fmt.Errorf("exec terminal: %w", err))
		}
		if box := req.Process.ConsoleSize; box != nil {
			// runc gives the container's console the size of its own.
			ws := &unix.Winsize{Row: uint16(box.Height), Col: uint16(box.Width)}
			if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, ws); err != nil {
				master.Close()
				slave.Close()
				return fail(fmt.Errorf("exec terminal size: %w", err))
			}
		}
		args = append(args, "--tty")
	}
	args = append(args, c.ID)
	r.settleFreezer(c.ID)
	cmd := exec.Command(r.path, args...)
	cmd.Env = minimalEnv()
	// Until the process has started, what runc writes on its stderr (or
	// the terminal) is runc's own error, not the session's output.
	gate := &gatedWriter{}
	var stdinPipe io.WriteCloser
	if !req.Process.Terminal {
		if req.Stdin != nil {
			// Our own copy: exec.Cmd.Wait would block on a reader that never ends.
			if stdinPipe, err = cmd.StdinPipe(); err != nil {
				return fail(err)
			}
		}
		cmd.Stdout = req.Stdout
		gate.w = req.Stderr
		cmd.Stderr = gate
	} else {
		gate.w = req.Stdout
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	if err := cmd.Start(); err != nil {
		if master != nil {
			master.Close()
			slave.Close()
		}
		return fail(fmt.Errorf("start %s exec: %w", r.name, err))
	}
	if slave != nil {
		// runc holds its own copy; ours would keep the master from seeing
		// the end of the session.
		slave.Close()
	}
	p.cmd = cmd
	if stdinPipe != nil {
		go func() {
			io.Copy(stdinPipe, req.Stdin)
			stdinPipe.Close()
		}()
	}
	if master != nil {
		p.master = master
		var copies sync.WaitGroup
		if req.Stdin != nil {
			go io.Copy(master, req.Stdin)
		}
		copies.Add(1)
		go func() {
			defer copies.Done()
			io.Copy(gate, master)
		}()
		p.copies = &copies
	}
	go p.wait(gate)
	// runc writes the pid file before it starts the process; wait for it or
	// for an early exit (a command that does not exist, for example).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid, err := readPidFile(pidFile); err == nil && pid > 0 {
			p.pid = pid
			gate.Open()
			break
		}
		select {
		case <-p.done:
			if p.err != nil {
				return nil, p.err
			}
			return p, nil
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			gate.Open()
			return p, nil
		}
	}
	return p, nil
}

// openPty opens a new pseudo-terminal pair.
func openPty() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

type execProcess struct {
	cmd    *exec.Cmd
	dir    string
	pid    int
	master *os.File
	copies *sync.WaitGroup
	done   chan struct{}
	code   int
	err    error
}

func (p *execProcess) wait(gate *gatedWriter) {
	err := p.cmd.Wait()
	if p.copies != nil {
		p.copies.Wait()
	}
	if p.master != nil {
		p.master.Close()
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		p.code = 0
	case errors.As(err, &exitErr):
		p.code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		// runc writes the pid file only once the process started; a
		// process that ran and failed quickly may exit before Exec read it.
		if _, perr := readPidFile(filepath.Join(p.dir, "pid")); perr != nil && p.code != 0 {
			// The process never started: report the runtime's reason
			// once, and not as the session's output.
			msg := cleanRuntimeMessage(lastLine(gate.Held()))
			if !strings.HasPrefix(msg, "exec failed") {
				msg = "exec failed: " + msg
			}
			p.err = errors.New(msg)
		}
	default:
		p.err = err
	}
	if p.err == nil {
		gate.Open()
	}
	os.RemoveAll(p.dir)
	close(p.done)
}

func (p *execProcess) Pid() int { return p.pid }

func (p *execProcess) Wait() (int, error) {
	<-p.done
	return p.code, p.err
}

func (p *execProcess) Signal(sig syscall.Signal) error {
	if p.pid <= 0 {
		return errors.New("exec process has no pid")
	}
	select {
	case <-p.done:
		return errors.New("exec process has exited")
	default:
	}
	return unix.Kill(p.pid, sig)
}

func (p *execProcess) Resize(width, height uint16) error {
	if p.master == nil {
		return errors.New("exec process has no terminal")
	}
	return unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: width, Row: height})
}

// gatedWriter holds what is written until Open, then passes it on to w
// (nil discards). Past gateLimit it opens by itself: that much is not a
// runtime's error message but a running process's output.
type gatedWriter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  []byte
	open bool
}

const gateLimit = 64 << 10

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		g.buf = append(g.buf, p...)
		if len(g.buf) > gateLimit {
			return len(p), g.openLocked()
		}
		return len(p), nil
	}
	if g.w == nil {
		return len(p), nil
	}
	return g.w.Write(p)
}

// Open passes what was held, and everything later, on to w.
func (g *gatedWriter) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.openLocked()
}

func (g *gatedWriter) openLocked() error {
	if g.open {
		return nil
	}
	g.open = true
	held := g.buf
	g.buf = nil
	if g.w == nil || len(held) == 0 {
		return nil
	}
	_, err := g.w.Write(held)
	return err
}

// Held returns what is held while the gate is closed.
func (g *gatedWriter) Held() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return string(g.buf)
}

func lastLine(s string) string {
	lines := splitNonEmpty(s)
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

func splitNonEmpty(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '\n' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
