package engine

import (
	"log/slog"
	"os"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/images/build"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
)

// openBuilder builds images with the engine's store, transfer (for FROM
// pulls) and OCI runtime.
func openBuilder(logger *slog.Logger, cfg Config, images *imagestore.Store, transfer *imagestore.Transfer, ctrs *containerBackend) (*build.Builder, error) {
	host, err := oci.DetectHost()
	if err != nil {
		return nil, err
	}
	resolv, _ := os.ReadFile("/etc/resolv.conf")
	return build.New(build.Options{
		Store: images, Transfer: transfer, Runtime: ctrs.runtime,
		Host: host, HostResolv: resolv, CDI: ctrs.cdi,
		Root: cfg.Root, RunRoot: cfg.RunRoot,
		MaxContextSize: cfg.MaxExpandedSize,
		Logger:         logger,
	})
}
