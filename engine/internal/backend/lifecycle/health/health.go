// Package health runs container healthchecks: on request (RunHealthCheck)
// and on each container's interval while it runs, keeping State.Health
// (status, failing streak, the last results) and emitting health_status
// events when the status changes.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/lifecycle/exec"
	"github.com/berth-project/berth/engine/internal/core"
)

// Health states, as Podman names them.
const (
	Healthy   = "healthy"
	Unhealthy = "unhealthy"
	Starting  = "starting"
)

// Defaults used when a healthconfig leaves a field zero.
const (
	DefaultTimeout = 30 * time.Second
	DefaultRetries = 3
	// OutputCeiling bounds the output kept of one result even where the
	// container asks for no bound (healthMaxLogSize 0): the results live in
	// the engine's state database.
	OutputCeiling = 1 << 20
)

// ErrNoHealthcheck is returned for a container without a healthcheck.
var ErrNoHealthcheck = fmt.Errorf("container has no defined healthcheck: %w", core.ErrStateConflict)

// Notifier is told about health results (the event bus): the container as
// it was before a check and its health state after it.
type Notifier interface {
	HealthEvent(ctx context.Context, c *core.Container, health core.HealthCheckResults)
}

// Checker runs healthchecks and schedules them.
type Checker struct {
	containers core.Containers
	notify     Notifier
	logger     *slog.Logger

	// runMu serialises checks of one container so results apply in order.
	runMu sync.Map // id -> *sync.Mutex
	// logDirs are the healthcheck log directories of containers whose
	// destination is one (id -> dir).
	logDirs sync.Map

	mu        sync.Mutex
	schedules map[string]schedule
	wg        sync.WaitGroup
	closed    bool
	// startupPassed holds the containers whose startup healthcheck passed
	// in this run: a schedule an update makes anew goes on with the
	// regular check (id -> struct{}).
	startupPassed sync.Map
}

// schedule is one container's running schedule and what it was made from.
type schedule struct {
	cancel context.CancelFunc
	timing timing
}

// timing is what a schedule depends on; the checks' commands, timeouts and
// retries are read at each check.
type timing struct {
	interval, startupInterval time.Duration
	startup                   bool
}

func timingOf(s *core.ContainerSpec) timing {
	t := timing{interval: s.HealthConfig.Interval}
	if sc := s.StartupHealthConfig; sc != nil {
		t.startup, t.startupInterval = true, sc.Interval
	}
	return t
}

// NewChecker returns a Checker; register its Hook with
// containers.Subscribe. notify may be nil.
func NewChecker(containers core.Containers, notify Notifier, logger *slog.Logger) *Checker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Checker{containers: containers, notify: notify, logger: logger, schedules: map[string]schedule{}}
}

// Command returns the process a healthconfig's Test runs, or nil when the
// container has no healthcheck ("NONE", empty).
func Command(test []string) []string {
	if len(test) == 0 {
		return nil
	}
	var cmd []string
	switch test[0] {
	case "", "NONE":
		return nil
	case "CMD":
		cmd = test[1:]
	case "CMD-SHELL":
		if len(test) < 2 {
			return nil
		}
		cmd = []string{"/bin/sh", "-c", strings.Join(test[1:], " ")}
	default:
		cmd = test
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return nil
	}
	return cmd
}

// Run performs one healthcheck of a running container and records it.
// The result's Status is this check's outcome (healthy or unhealthy), as
// Podman's RunHealthCheck answers; FailingStreak and Log are the
// container's state after it.
func (k *Checker) Run(ctx context.Context, nameOrID string) (core.HealthCheckResults, error) {
	c, err := k.containers.Lookup(ctx, nameOrID)
	if err != nil {
		// Podman's words: podman healthcheck run prints them.
		return core.HealthCheckResults{}, fmt.Errorf("unable to look up %s to perform a health check: %w", nameOrID, err)
	}
	cfg := c.Spec.HealthConfig
	if cfg == nil || Command(cfg.Test) == nil {
		return core.HealthCheckResults{}, fmt.Errorf("container %s: %w", c.ID, ErrNoHealthcheck)
	}
	if c.State != core.StateRunning {
		return core.HealthCheckResults{}, fmt.Errorf("container %s is not running: %w", c.ID, core.ErrStateConflict)
	}
	result, err := k.check(ctx, c, cfg)
	if err != nil {
		return result, err
	}
	if result.FailingStreak >= retries(cfg) {
		k.onFailure(ctx, c)
	}
	return result, nil
}

// check runs the healthcheck once and records its result.
func (k *Checker) check(ctx context.Context, c *core.Container, cfg *core.HealthConfig) (core.HealthCheckResults, error) {
	lock, _ := k.runMu.LoadOrStore(c.ID, &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	defer lock.(*sync.Mutex).Unlock()

	entry := k.execute(ctx, c, Command(cfg.Test), cfg.Timeout)
	maxCount, _ := c.Spec.HealthLogLimits()
	// Read again: the record may have changed while the check ran.
	cur, err := k.containers.Lookup(ctx, c.ID)
	if err != nil {
		return core.HealthCheckResults{}, err
	}
	inStartPeriod := cfg.StartPeriod > 0 && time.Now().Before(cur.StartedAt.Add(cfg.StartPeriod))
	next := apply(cur.Health, entry, inStartPeriod, retries(cfg), maxCount)
	if err := k.record(ctx, cur, next); err != nil {
		return core.HealthCheckResults{}, err
	}
	if k.notify != nil {
		k.notify.HealthEvent(ctx, cur, next)
	}
	result := next
	result.Status = Healthy
	if entry.ExitCode != 0 {
		result.Status = Unhealthy
	}
	return result, nil
}

// onFailure applies the container's on-failure action once its
// healthcheck made it unhealthy, as Podman does after each such check.
func (k *Checker) onFailure(ctx context.Context, c *core.Container) {
	ctx = context.WithoutCancel(ctx)
	var err error
	switch c.Spec.HealthCheckOnFailureAction {
	case core.HealthOnFailureKill:
		err = k.containers.Kill(ctx, c.ID, "SIGKILL")
	case core.HealthOnFailureRestart:
		err = k.containers.Restart(ctx, c.ID, nil)
	case core.HealthOnFailureStop:
		err = k.containers.Stop(ctx, c.ID, nil)
	default:
		return
	}
	if err != nil && !errors.Is(err, core.ErrNotModified) {
		k.logger.Warn("healthcheck on-failure action", "container", c.ID, "action", c.Spec.HealthCheckOnFailureAction.String(), "err", err)
	}
}

// runStartup runs the startup healthcheck once; it reports whether the
// check has now passed (Successes successes in a row). Retries failures in
// a row restart the container, as Podman 5 does.
func (k *Checker) runStartup(ctx context.Context, id string, st *startupState) (bool, error) {
	c, err := k.containers.Lookup(ctx, id)
	if err != nil {
		return false, err
	}
	sc := c.Spec.StartupHealthConfig
	if c.State != core.StateRunning || sc == nil {
		return false, fmt.Errorf("container %s is not running: %w", c.ID, core.ErrStateConflict)
	}
	entry := k.execute(ctx, c, Command(sc.Test), sc.Timeout)
	cur, err := k.containers.Lookup(ctx, id)
	if err != nil {
		return false, err
	}
	h := cur.Health
	h.Status = Starting
	maxCount, _ := cur.Spec.HealthLogLimits()
	h.Log = appendBounded(h.Log, entry, maxCount)
	if err := k.record(ctx, cur, h); err != nil {
		return false, err
	}
	if entry.ExitCode == 0 {
		st.failures = 0
		st.successes++
		return st.successes >= max(sc.Successes, 1), nil
	}
	st.successes = 0
	st.failures++
	if sc.Retries > 0 && st.failures >= sc.Retries {
		k.logger.Info("startup healthcheck failed: restarting the container", "container", id, "failures", st.failures)
		if err := k.containers.Restart(context.WithoutCancel(ctx), id, nil); err != nil && !errors.Is(err, core.ErrNotModified) {
			return false, err
		}
	}
	return false, nil
}

// startupState counts a startup healthcheck's results in a row.
type startupState struct {
	successes, failures int
}

func retries(cfg *core.HealthConfig) int {
	if cfg.Retries <= 0 {
		return DefaultRetries
	}
	return cfg.Retries
}

// apply folds one result into the health state, as Podman does: success
// resets the streak; a failure outside the start period extends it and
// makes the container unhealthy once it reaches retries.
func apply(h core.HealthCheckResults, entry core.HealthCheckLog, inStartPeriod bool, retries, maxCount int) core.HealthCheckResults {
	if entry.ExitCode == 0 {
		h.Status = Healthy
		h.FailingStreak = 0
	} else {
		if h.Status == "" {
			h.Status = Starting
		}
		if !inStartPeriod {
			h.FailingStreak++
			if h.FailingStreak >= retries {
				h.Status = Unhealthy
			}
		}
	}
	h.Log = appendBounded(h.Log, entry, maxCount)
	return h
}

// appendBounded returns log with entry appended (a copy), keeping the
// newest maxCount entries; 0 keeps them all.
func appendBounded(log []core.HealthCheckLog, entry core.HealthCheckLog, maxCount int) []core.HealthCheckLog {
	out := append(append([]core.HealthCheckLog(nil), log...), entry)
	if maxCount > 0 && len(out) > maxCount {
		out = out[len(out)-maxCount:]
	}
	return out
}

// record stores a container's health state, and where its healthcheck log
// destination is a directory writes it there too, as Podman does: the JSON
// of the state in DIR/ID-healthcheck.log, replaced atomically.
func (k *Checker) record(ctx context.Context, c *core.Container, h core.HealthCheckResults) error {
	if err := k.containers.SetHealth(ctx, c.ID, h); err != nil {
		return err
	}
	dir := c.Spec.HealthLogDir()
	if dir == "" {
		return nil
	}
	k.logDirs.Store(c.ID, dir)
	if err := writeLogFile(dir, c.ID, h); err != nil {
		k.logger.Warn("writing the healthcheck log", "container", c.ID, "dir", dir, "err", err)
	}
	return nil
}

// writeLogFile writes h to DIR/ID-healthcheck.log through a temporary file
// beside it (removed with the log when the container goes).
func writeLogFile(dir, id string, h core.HealthCheckResults) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	path := core.HealthLogFile(dir, id)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// removeLogFile removes a removed container's healthcheck log file.
func (k *Checker) removeLogFile(id string) {
	dir, ok := k.logDirs.LoadAndDelete(id)
	if !ok {
		return
	}
	path := core.HealthLogFile(dir.(string), id)
	for _, p := range []string{path, path + ".tmp"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			k.logger.Warn("removing the healthcheck log", "container", id, "path", p, "err", err)
		}
	}
}

// outputLimit is how much of one check's output is kept: the container's
// healthMaxLogSize, OutputCeiling when that is 0 or larger.
func outputLimit(size int) int {
	if size <= 0 || size > OutputCeiling {
		return OutputCeiling
	}
	return size
}

// execute runs the check command and returns its log entry: exit code 0
// for success, 1 for failure, -1 when it ran past the timeout (then it is
// killed).
func (k *Checker) execute(ctx context.Context, c *core.Container, cmd []string, timeout time.Duration) core.HealthCheckLog {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	_, size := c.Spec.HealthLogLimits()
	out := exec.CappedOutput{Limit: outputLimit(size)}
	start := time.Now()
	entry := func(code int, output string) core.HealthCheckLog {
		return core.HealthCheckLog{Start: start.Format(time.RFC3339Nano), End: time.Now().Format(time.RFC3339Nano), ExitCode: code, Output: output}
	}
	proc, err := k.containers.Exec(context.WithoutCancel(ctx), c.ID, core.ExecRequest{
		Process: exec.ProcessFor(c, cmd, false),
		Stdout:  &out,
		Stderr:  &out,
	})
	if err != nil {
		return entry(1, err.Error())
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := proc.Wait()
		done <- result{code, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil || r.code != 0 {
			return entry(1, strings.TrimRight(out.String(), "\n"))
		}
		return entry(0, strings.TrimRight(out.String(), "\n"))
	case <-timer.C:
		_ = proc.Signal(syscall.SIGKILL)
		<-done
		return entry(-1, fmt.Sprintf("healthcheck command exceeded timeout of %s", timeout))
	}
}

// Hook starts the schedule of a container when it starts and stops it when
// the container stops or goes away.
func (k *Checker) Hook(ctx context.Context, ev core.ContainerEvent) {
	switch ev.Type {
	case core.EventStart, core.EventRestart, core.EventRestore:
		c, err := k.containers.Lookup(ctx, ev.ID)
		if err != nil {
			return
		}
		k.startupPassed.Delete(c.ID)
		k.schedule(c, false)
	case core.EventUpdate:
		// podman update may have changed the checks: a running
		// container's schedule follows, its health state stays.
		c, err := k.containers.Lookup(ctx, ev.ID)
		if err != nil {
			return
		}
		k.noteLogDir(c)
		if c.State == core.StateRunning || c.State == core.StatePaused {
			k.schedule(c, true)
		}
	case core.EventDied, core.EventStop:
		// The exit watcher may deliver a run's "died" after a restart
		// (one a healthcheck asked for, say) has started the next run:
		// that run's schedule stays.
		if c, err := k.containers.Lookup(ctx, ev.ID); err == nil && c.State == core.StateRunning {
			return
		}
		k.unschedule(ev.ID)
	case core.EventRemove:
		k.unschedule(ev.ID)
		k.startupPassed.Delete(ev.ID)
		k.runMu.Delete(ev.ID)
		k.removeLogFile(ev.ID)
	case core.EventCreate:
		if c, err := k.containers.Lookup(ctx, ev.ID); err == nil {
			k.noteLogDir(c)
		}
	}
}

// StartAll schedules every running container with a healthcheck (engine
// start).
func (k *Checker) StartAll(ctx context.Context) error {
	// Every container: a stopped one's healthcheck log file goes with it.
	list, err := k.containers.List(ctx, core.ListContainersOptions{All: true})
	if err != nil {
		return err
	}
	for _, row := range list {
		c, err := k.containers.Lookup(ctx, row.ID)
		if err != nil {
			continue
		}
		k.noteLogDir(c)
		if c.State == core.StateRunning {
			k.schedule(c, false)
		}
	}
	return nil
}

// noteLogDir remembers the directory of a container's healthcheck log, so
// that its removal removes the file (the record is gone by then).
func (k *Checker) noteLogDir(c *core.Container) {
	if dir := c.Spec.HealthLogDir(); dir != "" {
		k.logDirs.Store(c.ID, dir)
	}
}

// schedule runs c's checks on their intervals while it runs. After an
// update (updated) it keeps a schedule whose timing did not change, drops
// one whose check is gone, and leaves the health state as it is.
func (k *Checker) schedule(c *core.Container, updated bool) {
	cfg := c.Spec.HealthConfig
	startup := c.Spec.StartupHealthConfig
	if cfg == nil || Command(cfg.Test) == nil || (cfg.Interval <= 0 && startup == nil) {
		if updated {
			k.unschedule(c.ID)
		}
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	t := timingOf(&c.Spec)
	if old, ok := k.schedules[c.ID]; ok {
		if updated && old.timing == t {
			return
		}
		old.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.schedules[c.ID] = schedule{cancel: cancel, timing: t}
	// A fresh start begins in "starting" until the first result.
	if !updated && (c.Health.Status == "" || c.Health.Status == Unhealthy || c.Health.Status == Healthy) {
		_ = k.containers.SetHealth(ctx, c.ID, core.HealthCheckResults{Status: Starting, Log: c.Health.Log})
	}
	if _, passed := k.startupPassed.Load(c.ID); passed {
		startup = nil
	}
	k.wg.Add(1)
	go func(id string, interval time.Duration) {
		defer k.wg.Done()
		if startup != nil {
			if !k.awaitStartup(ctx, id, startup) {
				return
			}
			k.startupPassed.Store(id, struct{}{})
		}
		if interval <= 0 {
			return
		}
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if _, err := k.Run(ctx, id); err != nil && !errors.Is(err, context.Canceled) {
					k.logger.Debug("scheduled healthcheck", "container", id, "err", err)
					if errors.Is(err, core.ErrNoSuchContainer) {
						return
					}
				}
			}
		}
	}(c.ID, cfg.Interval)
}

// DefaultStartupInterval is the startup healthcheck's interval when its
// configuration leaves it zero (Podman's default).
const DefaultStartupInterval = 30 * time.Second

// awaitStartup runs the startup healthcheck on its interval until it
// passes (true) or the schedule ends (false).
func (k *Checker) awaitStartup(ctx context.Context, id string, sc *core.StartupHealthConfig) bool {
	interval := sc.Interval
	if interval <= 0 {
		interval = DefaultStartupInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var st startupState
	for {
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
			passed, err := k.runStartup(ctx, id, &st)
			if passed {
				return true
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				// Not running (paused, between a stop and a start) is
				// routine; anything else, a failed restart above all, is
				// worth a warning.
				level := slog.LevelWarn
				if errors.Is(err, core.ErrStateConflict) {
					level = slog.LevelDebug
				}
				k.logger.Log(ctx, level, "startup healthcheck", "container", id, "err", err)
				if errors.Is(err, core.ErrNoSuchContainer) {
					return false
				}
			}
		}
	}
}

func (k *Checker) unschedule(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if sc, ok := k.schedules[id]; ok {
		sc.cancel()
		delete(k.schedules, id)
	}
}

// Close stops every schedule and waits for running checks.
func (k *Checker) Close() {
	k.mu.Lock()
	k.closed = true
	for id, sc := range k.schedules {
		sc.cancel()
		delete(k.schedules, id)
	}
	k.mu.Unlock()
	k.wg.Wait()
}
