package engine

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/pods"
)

// infraImages finds images in the store and imports the infra image.
type infraImages struct {
	*imagestore.Store
	*imagestore.Transfer
}

// openPods loads the pods and connects them to the containers (members,
// exit policy), the image store (infra image), container I/O (top, stats)
// and the event log.
func openPods(ctx context.Context, logger *slog.Logger, cfg Config, ctrs *containerBackend, images *imagestore.Store, transfer *imagestore.Transfer, streams *streamServices) (*pods.Manager, error) {
	mgr, err := pods.Open(ctx, pods.Options{
		DB:            ctrs.db,
		Containers:    ctrs.manager,
		Members:       ctrs.manager,
		Images:        infraImages{Store: images, Transfer: transfer},
		IO:            streams.io,
		Events:        streams.events.PodEvent,
		Logger:        logger,
		StateDir:      cfg.RunRoot,
		CgroupManager: cfg.CgroupManager,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: pods: %w", err)
	}
	return mgr, nil
}
