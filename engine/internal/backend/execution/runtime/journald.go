package runtime

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/berth-project/berth/engine/internal/core"
)

// journaldSocket is where conmon's journald driver (sd_journal_sendv)
// sends the container's output; it exists only where journald runs.
const journaldSocket = "/run/systemd/journal/socket"

// Journald says why the journald log driver cannot be used on this host,
// nil when it can: conmon sends each line to journald's socket, and the
// engine reads them back with journalctl (see logs.Journal).
func Journald() error {
	if _, err := os.Stat(journaldSocket); err != nil {
		return fmt.Errorf("journald does not run on this host (no %s): use the k8s-file log driver", journaldSocket)
	}
	if _, err := exec.LookPath("journalctl"); err != nil {
		return fmt.Errorf("journalctl is not installed: the engine reads a journald log back with it")
	}
	return nil
}

// LogDrivers are the log drivers this host offers: k8s-file, and journald
// where it runs.
func LogDrivers() []string {
	if Journald() == nil {
		return []string{core.LogDriverK8sFile, core.LogDriverJournald, core.LogDriverNone}
	}
	return []string{core.LogDriverK8sFile, core.LogDriverNone}
}

// logArg is conmon's -l value for o: journald, or k8s-file:PATH.
func logArg(o CreateOptions) string {
	if o.LogDriver == core.LogDriverJournald || o.LogDriver == core.LogDriverNone {
		return o.LogDriver
	}
	return core.LogDriverK8sFile + ":" + o.LogPath
}
