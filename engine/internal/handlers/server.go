// Package handlers is the engine's HTTP layer: it decodes libpod API requests,
// calls the engine core and encodes the answers. routes.go is the map of the API.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerio"
	"github.com/berth-project/berth/engine/internal/backend/execution/logs"
	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
	"github.com/berth-project/berth/engine/internal/backend/execution/top"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/server"
)

// Deps are the core services the handlers call. A nil service leaves its
// routes unregistered.
type Deps struct {
	// System answers info, version and system check.
	System core.System
	// Images are the image metadata operations.
	Images core.Images
	// Transfer moves images in and out of the store (pull, push, load, import, export, scp).
	Transfer core.ImageTransfer
	// Manifests are the manifest lists.
	Manifests core.ManifestLists
	// Artifacts are the OCI artifacts.
	Artifacts core.Artifacts
	// Containers are the container lifecycle operations.
	Containers core.Containers
	// Volumes are the volume operations.
	Volumes core.Volumes
	// Secrets are the secret operations.
	Secrets core.Secrets
	// Pods are the pod operations.
	Pods core.Pods
	// Networks are the network operations.
	Networks core.Networks
	// ContainerIO serves logs, attach, terminal resize, stats and top.
	ContainerIO ContainerIO
	// Exec are the exec sessions.
	Exec ExecSessions
	// Events is the engine's event stream.
	Events EventSource
	// Systemd writes systemd units for containers and pods.
	Systemd core.SystemdGenerator
	// KubeGenerator writes Kubernetes YAML; KubeApplier sends it to a cluster.
	KubeGenerator core.KubeGenerator
	KubeApplier   core.KubeApplier
	// Quadlets keeps quadlet units.
	Quadlets core.Quadlets
	// Kube plays and tears down Kubernetes YAML.
	Kube core.KubePlayer
	// Build builds images from a Containerfile.
	Build core.Builder
	// Health runs healthchecks on request.
	Health HealthChecker
	// Ready checks are reported by /readyz.
	Ready map[string]server.Check
}

// Config is what the HTTP layer needs beyond its dependencies.
type Config struct {
	// SwaggerSpec is the path of the OpenAPI document to serve; the embedded copy is used where it is missing.
	SwaggerSpec string
	// Metrics records request metrics; nil creates one (namespace berth_engine).
	Metrics *server.Metrics
	// Started is when the engine started (reported by info).
	Started time.Time
	// Docker serves Docker's Engine API: every path that is not libpod's
	// (nor /metrics, /healthz, /readyz, /_ping) goes to it. Nil answers
	// those paths with 404.
	Docker http.Handler
}

// Server holds the handlers' dependencies.
type Server struct {
	logger  *slog.Logger
	deps    Deps
	cfg     Config
	metrics *server.Metrics
	// patterns are every registered route's path, split into segments
	// (filled once the routes are built; read by methodNotAllowed).
	patterns [][]string
	// imageListGzip holds the compressed unfiltered image listings, by All.
	imageListGzip [2]*gzipMemo
}

// NewServer builds the engine's HTTP handler.
func NewServer(logger *slog.Logger, deps Deps, cfg Config) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	metrics := cfg.Metrics
	if metrics == nil {
		metrics = server.NewMetrics("berth_engine")
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	s := &Server{logger: logger, deps: deps, cfg: cfg, metrics: metrics, imageListGzip: [2]*gzipMemo{{}, {}}}
	return s.routes()
}

// ContainerIO is what the log, attach, resize, stats and top handlers need
// from the engine (containerio.Service implements it).
type ContainerIO interface {
	Logs(ctx context.Context, nameOrID string, opts containerio.LogOptions, emit func(logs.Line) error) error
	Attach(ctx context.Context, nameOrID string) (*containerio.Session, error)
	Resize(ctx context.Context, nameOrID string, height, width uint16) error
	Stats(ctx context.Context, nameOrIDs []string) ([]stats.ContainerStats, error)
	DockerStats(ctx context.Context, nameOrID string, prev *stats.DockerStats) (*stats.DockerStats, error)
	Top(ctx context.Context, nameOrID string, psArgs []string) (*top.Result, error)
}
