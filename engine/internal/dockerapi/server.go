// Package dockerapi is the engine's second front door: Docker's Engine API,
// served beside libpod on the same listeners. It translates Docker's shapes
// into calls on the same engine core the libpod handlers use, so a
// container made with `docker run` is the container `podman ps` lists; it
// holds no state of its own. routes.go is the map of what it serves.
package dockerapi

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerio"
	"github.com/berth-project/berth/engine/internal/backend/execution/logs"
	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
	"github.com/berth-project/berth/engine/internal/backend/execution/top"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/exec"
	"github.com/berth-project/berth/engine/internal/backend/platform/events"
	"github.com/berth-project/berth/engine/internal/core"
)

// Docker API versions served: requests under /v{version}/ outside this
// range are refused with Docker's message; unversioned paths get the newest.
const (
	MinAPIVersion = core.MinCompatAPIVersion
	APIVersion    = core.CompatAPIVersion
)

// ContainerIO is what the log, attach, resize, stats and top routes need
// (containerio.Service implements it).
type ContainerIO interface {
	Logs(ctx context.Context, nameOrID string, opts containerio.LogOptions, emit func(logs.Line) error) error
	Attach(ctx context.Context, nameOrID string) (*containerio.Session, error)
	Resize(ctx context.Context, nameOrID string, height, width uint16) error
	DockerStats(ctx context.Context, nameOrID string, prev *stats.DockerStats) (*stats.DockerStats, error)
	HostTop(ctx context.Context, nameOrID, psArgs string) (*top.Result, error)
}

// ExecSessions are the exec operations (exec.Manager implements them).
type ExecSessions interface {
	Create(ctx context.Context, nameOrID string, cfg exec.Config) (string, error)
	Get(ctx context.Context, id string) (*exec.Session, error)
	Start(ctx context.Context, id string, streams exec.Streams, size *[2]uint16) (*exec.Started, error)
	Resize(ctx context.Context, id string, height, width uint16) error
}

// EventSource reads the engine's events (events.Bus implements it).
type EventSource interface {
	Read(ctx context.Context, opts events.ReadOptions, emit func(events.Event) error) error
}

// Deps are the core services Docker's routes translate to. A nil service
// leaves its routes unregistered.
type Deps struct {
	System      core.System
	Containers  core.Containers
	Images      core.Images
	Transfer    core.ImageTransfer
	Networks    core.Networks
	Volumes     core.Volumes
	Build       core.Builder
	ContainerIO ContainerIO
	Exec        ExecSessions
	Events      EventSource
}

// Config is what the Docker front door needs beyond its dependencies.
type Config struct {
	// DefaultNetwork is the engine's default network, which Docker clients
	// know as "bridge".
	DefaultNetwork string
}

// server holds the routes' dependencies.
type server struct {
	logger *slog.Logger
	deps   Deps
	cfg    Config
	// starting holds the exec sessions between the hijack of their start
	// and the engine's start of the process (see execStart).
	starting sync.Map
}

// NewHandler builds the Docker Engine API handler. It expects every path
// that is not libpod's: "/v1.41/containers/json" and "/containers/json"
// alike.
func NewHandler(logger *slog.Logger, deps Deps, cfg Config) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultNetwork == "" {
		cfg.DefaultNetwork = "podman"
	}
	s := &server{logger: logger, deps: deps, cfg: cfg}
	return versioned(s.routes())
}
