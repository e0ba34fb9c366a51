package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Healthcheck log destinations (Podman 5's --health-log-destination); any
// other value is a directory.
const (
	HealthLogLocal        = "local"
	HealthLogEventsLogger = "events_logger"
)

// Podman's defaults for the healthcheck results kept (a client that sends
// neither bound gets these).
const (
	DefaultHealthMaxLogCount = 5
	DefaultHealthMaxLogSize  = 500
)

// ValidateHealthLogDestination accepts "", "local", "events_logger" or the
// absolute path of an existing directory, as Podman does (a relative path
// would name a directory relative to the engine's working directory, which
// an API client does not know: refused).
func ValidateHealthLogDestination(dest string) error {
	switch dest {
	case "", HealthLogLocal, HealthLogEventsLogger:
		return nil
	}
	if !filepath.IsAbs(dest) {
		return fmt.Errorf("%q is not local, events_logger or an absolute directory path", dest)
	}
	fi, err := os.Stat(dest)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("directory %s does not exist", dest)
		}
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dest)
	}
	return nil
}

// HealthLogDir is the directory a container's healthcheck results are
// written to, or "" when they stay in its state only.
func (s *ContainerSpec) HealthLogDir() string {
	switch s.HealthLogDestination {
	case "", HealthLogLocal, HealthLogEventsLogger:
		return ""
	}
	return filepath.Clean(s.HealthLogDestination)
}

// HealthLogFile is the file DIR/ID-healthcheck.log of a container whose
// healthcheck log destination is a directory, as Podman names it.
func HealthLogFile(dir, id string) string {
	return filepath.Join(dir, id+"-healthcheck.log")
}

// HealthLogLimits are the number of results a container keeps and the
// bytes of output kept per result; 0 is no bound.
func (s *ContainerSpec) HealthLogLimits() (count, size int) {
	count, size = DefaultHealthMaxLogCount, DefaultHealthMaxLogSize
	if s.HealthMaxLogCount != nil {
		count = int(*s.HealthMaxLogCount)
	}
	if s.HealthMaxLogSize != nil {
		size = int(*s.HealthMaxLogSize)
	}
	return count, size
}
