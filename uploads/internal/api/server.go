// Package api serves the uploads API under /v1/uploads, plus /healthz, /readyz and
// /metrics. routes.go is the map of every endpoint and the checks that guard it.
package api

import (
	"log/slog"
	"net/http"

	"github.com/berth-project/berth/shared/auth"
	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/store"
)

// Limits bound what clients can store; zero means unlimited. Exceeding one is 413.
type Limits struct {
	MaxFileSize   int64 // bytes of one file
	MaxUploadSize int64 // bytes of all files of an upload
	MaxFiles      int   // regular files per upload
	MaxPathLength int   // bytes of a file path
	MaxPathDepth  int   // segments of a file path
}

// Config holds what the server needs besides its store and tree.
type Config struct {
	Limits Limits
	// Tokens, when not empty, are the bearer tokens accepted on /v1.
	Tokens []string
	// ReadyChecks are run by /readyz, keyed by dependency name.
	ReadyChecks map[string]server.Check
	// Metrics is the registry /metrics serves; NewServer registers the uploads metrics
	// in it.
	Metrics *server.Metrics
	// OnPending is called after an upload became pending (to wake the worker).
	OnPending func()
	// Space, when set, keeps the data directory's headroom: PUTs that would eat into it
	// are refused with 507, and a delete that finds the disk full gives up the reserve.
	Space *files.Space
}

// Server holds the dependencies of the handlers.
type Server struct {
	logger *slog.Logger
	store  store.Store
	tree   *files.Tree
	cfg    Config
	auth   *auth.Tokens
}

// NewServer returns the HTTP handler of the uploads service.
func NewServer(logger *slog.Logger, st store.Store, tree *files.Tree, cfg Config) http.Handler {
	if cfg.Metrics == nil {
		cfg.Metrics = server.NewMetrics("berth_uploads")
	}
	if cfg.OnPending == nil {
		cfg.OnPending = func() {}
	}
	s := &Server{logger: logger, store: st, tree: tree, cfg: cfg, auth: auth.NewTokens(cfg.Tokens)}
	return s.routes()
}
