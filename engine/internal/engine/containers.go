package engine

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/containers"
	"github.com/berth-project/berth/engine/internal/backend/platform/apparmor"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/backend/platform/userns"
	"github.com/berth-project/berth/engine/internal/backend/resources/cdi"
	"github.com/berth-project/berth/engine/internal/backend/resources/network"
	"github.com/berth-project/berth/engine/internal/backend/resources/secrets"
	"github.com/berth-project/berth/engine/internal/backend/resources/volumes"
)

// containerBackend is the state database, the OCI runtime and the container
// manager built on them.
type containerBackend struct {
	db       *state.DB
	runtime  *runtime.Runtime
	manager  *containers.Manager
	volumes  *volumes.Store
	secrets  *secrets.Store
	networks *network.Manager
	cdi      *cdi.Registry
}

// NetworkConfig names the default network and where new networks' subnets
// and bridge names come from.
type NetworkConfig struct {
	// DefaultNetwork, DefaultBridge and DefaultSubnet describe the network
	// created at first start (podman, podman0, 10.88.0.0/16).
	DefaultNetwork, DefaultBridge, DefaultSubnet string
	// SubnetPool lists the IPv4 subnets new networks get a /24 of (10.89.0.0/16).
	SubnetPool []string
	// BridgePrefix names new networks' bridges PREFIX1, PREFIX2 ... (podman).
	BridgePrefix string
	// DefaultMode is the network mode of containers that name none:
	// "bridge" (the default network; the default) or "private" (a
	// namespace with loopback only, like Podman's containers.conf netns).
	DefaultMode string
}

// openContainers opens the state database under cfg.Root, finds conmon and
// the OCI runtime, and loads (and reconciles) every container.
func openContainers(ctx context.Context, logger *slog.Logger, cfg Config, images *imagestore.Store, commits containers.ImageCommitter, appArmor apparmor.Host, artifacts containers.ArtifactSource) (*containerBackend, error) {
	db, err := state.Open(ctx, filepath.Join(cfg.Root, "state.db"))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	rt, err := runtime.New(runtime.Options{Name: cfg.Runtime, RunRoot: cfg.RunRoot, CRIUPath: cfg.CRIU, Logger: logger})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	vols, err := volumes.Open(ctx, db, filepath.Join(cfg.Root, "volumes"), logger)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	vols.SetMaxImportSize(cfg.MaxExpandedSize)
	nets, err := network.Open(ctx, network.Options{
		DB: db, RunRoot: cfg.RunRoot, Logger: logger,
		DefaultNetwork: cfg.Network.DefaultNetwork, DefaultBridge: cfg.Network.DefaultBridge,
		DefaultSubnet: cfg.Network.DefaultSubnet, SubnetPool: cfg.Network.SubnetPool,
		BridgePrefix: cfg.Network.BridgePrefix,
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	secretStore, err := secrets.Open(ctx, db, filepath.Join(cfg.Root, "secrets"), logger)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	devices := cdi.Open(append(slices.Clone(cdi.DefaultSpecDirs), cfg.CDISpecDirs...))
	mgr, err := containers.Open(ctx, containers.Options{CDI: devices, Artifacts: artifacts, Images: images, Commits: commits, Runtime: rt, DB: db, Logger: logger, Volumes: vols, Secrets: secretStore, Networks: nets, DefaultNetworkMode: cfg.Network.DefaultMode, SubIDs: subIDs(logger), AppArmor: appArmor, SeccompDefaultPath: seccompDefaultPath(cfg), MaxImportSize: cfg.MaxExpandedSize, HoldEvents: true, CgroupManager: cfg.CgroupManager})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	images.SetImageUsers(mgr)
	vols.SetUsers(mgr)
	secretStore.SetUsers(mgr)
	nets.SetUsers(mgr)
	nets.ReleaseOrphans(ctx, func(id string) bool {
		_, err := mgr.Lookup(ctx, id)
		return err == nil
	})
	return &containerBackend{db: db, runtime: rt, manager: mgr, volumes: vols, secrets: secretStore, networks: nets, cdi: devices}, nil

}

// Close stops watching containers (they keep running), releases the bridges
// no container uses and closes the database.
func (b *containerBackend) Close() error {
	b.manager.Close()
	b.networks.Close()
	return b.db.Close()
}

// subIDs gives the "containers" user subordinate ID ranges where the host
// has none and answers them; without them (files that cannot be written)
// user namespaces are refused, and the engine still serves the rest.
func subIDs(logger *slog.Logger) *userns.Ranges {
	r, err := userns.Ensure(userns.HostFiles)
	if err != nil {
		logger.Warn("user namespaces unavailable: no subordinate ID ranges", "user", userns.User, "err", err)
		return nil
	}
	return &r
}
