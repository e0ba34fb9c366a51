package quadletactivate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Systemd hands generated services to systemd on a host where it runs.
type Systemd struct {
	// UnitDir is where generated services are written
	// (/etc/systemd/system).
	UnitDir string
	// EngineURL is the engine's API address the generated services give
	// podman (--url); "" runs podman against its own default.
	EngineURL string
	// RunDir is systemd's runtime directory (/run/systemd/system); it
	// exists only where systemd is the init system.
	RunDir string
	// Reload asks systemd to read the unit files again; nil runs
	// "systemctl daemon-reload".
	Reload func() error
}

// errNoSystemd: the host does not run systemd.
var errNoSystemd = errors.New("no systemd runs here (PID 1 is not systemd): quadlets are kept and activated by the engine, not handed to systemd")

// check refuses a systemd reload where systemd does not run.
func (s Systemd) check() error {
	dir := s.RunDir
	if dir == "" {
		dir = "/run/systemd/system"
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return errNoSystemd
	}
	return nil
}

// apply writes the services of write (name -> content), removes those of
// remove, and reloads systemd once.
func (s Systemd) apply(write map[string]string, remove []string) error {
	if err := os.MkdirAll(s.unitDir(), 0o755); err != nil {
		return fmt.Errorf("systemd unit directory: %w", err)
	}
	for name, content := range write {
		if err := os.WriteFile(filepath.Join(s.unitDir(), name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	for _, name := range remove {
		if err := os.Remove(filepath.Join(s.unitDir(), name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("removing %s: %w", name, err)
		}
	}
	if s.Reload != nil {
		return s.Reload()
	}
	return daemonReload()
}

// has reports whether service name was handed to systemd.
func (s Systemd) has(name string) bool {
	_, err := os.Stat(filepath.Join(s.unitDir(), name))
	return err == nil
}

func (s Systemd) unitDir() string {
	if s.UnitDir == "" {
		return "/etc/systemd/system"
	}
	return s.UnitDir
}

func daemonReload() error {
	if out, err := exec.Command("systemctl", "daemon-reload").CombinedOutput(); err != nil {
		return fmt.Errorf("systemctl daemon-reload: %v: %s", err, out)
	}
	return nil
}
