package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/berth-project/berth/shared/auth"
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
		if o.engineTLS != [3]string{} || o.engineTokenFile != "" {
			return nil, errors.New("engine-ca, engine-cert, engine-key and engine-token-file need engine-url")
		}
		return processor.Unsupported{}, nil
	}
	cfg := engineclient.Config{URL: o.engineURL, CAFile: o.engineTLS[0], CertFile: o.engineTLS[1], KeyFile: o.engineTLS[2]}
	if o.engineTokenFile != "" {
		tokens, err := auth.LoadTokens(o.engineTokenFile)
		if err != nil {
			return nil, fmt.Errorf("engine-token-file: %w", err)
		}
		if len(tokens) != 1 {
			return nil, fmt.Errorf("engine-token-file %s: holds %d tokens, want one", o.engineTokenFile, len(tokens))
		}
		cfg.Token = tokens[0]
	}
	client, err := engineclient.New(cfg)
	if err != nil {
		return nil, err
	}
	d := deploy.New(client, logger.With("component", "deploy"), nil)
	checks["engine"] = d.Ready
	return d, nil
}
