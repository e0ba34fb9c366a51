package engine

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadletactivate"
	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/backend/images/build"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/pods"
	"github.com/berth-project/berth/engine/internal/core"
)

// openQuadlets opens the quadlet directory and the activator that turns
// its units into containers, pods, networks, volumes and images; an
// activation the last run left unfinished is settled here.
func openQuadlets(ctx context.Context, logger *slog.Logger, cfg Config, ctrs *containerBackend, podMgr *pods.Manager,
	images *imagestore.Store, transfer *imagestore.Transfer, builder *build.Builder, kube core.KubePlayer) (*quadletactivate.Manager, error) {
	store, err := quadlets.Open(filepath.Join(cfg.Root, "quadlets"))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	mgr, err := quadletactivate.Open(ctx, quadletactivate.Options{
		Store:             store,
		Records:           ctrs.db,
		Containers:        ctrs.manager,
		Pods:              podMgr,
		Networks:          ctrs.networks,
		Volumes:           ctrs.volumes,
		Images:            images,
		Transfer:          transfer,
		Builder:           builder,
		Kube:              kube,
		Systemd:           quadletactivate.Systemd{EngineURL: cfg.Listen},
		ActivateOnInstall: cfg.ActivateQuadlets,
		Logger:            logger,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: quadlets: %w", err)
	}
	return mgr, nil
}
