package core

import "context"

// SystemdGenerator writes systemd service units that run a container, or a
// pod and its members, through the engine (podman generate systemd).
type SystemdGenerator interface {
	// GenerateSystemd answers the unit files keyed by unit name (without
	// ".service"), as Podman's GenerateSystemdReport.Units.
	GenerateSystemd(ctx context.Context, nameOrID string, opts SystemdOptions) (map[string]string, error)
}

// SystemdOptions are GenerateSystemd's query parameters.
type SystemdOptions struct {
	// UseName names units and commands by the object's name, not its ID.
	UseName bool
	// New makes units that create the container when they start and remove
	// it when they stop, from its create command.
	New bool
	// NoHeader leaves out the generated-by comment.
	NoHeader bool
	// RestartPolicy is systemd's Restart= (default on-failure).
	RestartPolicy string
	// RestartSec is RestartSec= (0: not set).
	RestartSec uint
	// StartTimeout is TimeoutStartSec= (0: not set).
	StartTimeout uint
	// StopTimeout is the seconds stop waits before killing (default 10).
	StopTimeout uint
	// ContainerPrefix, PodPrefix and Separator make the unit names.
	ContainerPrefix, PodPrefix, Separator string
	// Wants, After and Requires are extra [Unit] dependencies.
	Wants, After, Requires []string
	// AdditionalEnv are extra Environment= lines (KEY=VALUE).
	AdditionalEnv []string
}
