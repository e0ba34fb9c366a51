package engine

import (
	"log/slog"
	"os"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/images/build"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/platform/apparmor"
)

// openBuilder builds images with the engine's store, transfer (for FROM
// pulls) and OCI runtime; RUN steps run under the engine's AppArmor
// profile where the host enforces AppArmor, as containers do.
func openBuilder(logger *slog.Logger, cfg Config, images *imagestore.Store, transfer *imagestore.Transfer, ctrs *containerBackend, appArmor apparmor.Host) (*build.Builder, error) {
	host, err := oci.DetectHost()
	if err != nil {
		return nil, err
	}
	resolv, _ := os.ReadFile("/etc/resolv.conf")
	profile := ""
	if appArmor.Enabled {
		profile = apparmor.DefaultProfile
	}
	return build.New(build.Options{
		AppArmorProfile: profile,
		Store:           images, Transfer: transfer, Runtime: ctrs.runtime,
		Host: host, HostResolv: resolv, CDI: ctrs.cdi,
		Root: cfg.Root, RunRoot: cfg.RunRoot,
		MaxContextSize: cfg.MaxExpandedSize,
		Logger:         logger,
	})
}
