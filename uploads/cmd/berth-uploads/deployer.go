package main

import (
	"log/slog"

	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/uploads/engineclient"
	"github.com/berth-project/berth/uploads/internal/deploy"
	"github.com/berth-project/berth/uploads/internal/processor"
)

// newDeployer is the one place that chooses how files are deployed. Without an engine
// URL every file becomes an "unsupported file type" error entry; with one, files go to
// the engine through engineclient, and the engine joins the readiness checks.
func newDeployer(o options, logger *slog.Logger, checks map[string]server.Check) (processor.Deployer, error) {
	if o.engineURL == "" {
		return processor.Unsupported{}, nil
	}
	client, err := engineclient.New(engineclient.Config{URL: o.engineURL})
	if err != nil {
		return nil, err
	}
	d := deploy.New(client, logger.With("component", "deploy"), nil)
	checks["engine"] = d.Ready
	return d, nil
}
