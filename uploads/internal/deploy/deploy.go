// Package deploy is the engine-backed Deployer of the processor: it sends the
// image archives of an upload to berth-engine's ImagesLoad through
// engineclient, and refuses every other file type.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/berth-project/berth/uploads/engineclient"
	"github.com/berth-project/berth/uploads/internal/processor"
)

// Engine is the part of the engine API the deployer uses; *engineclient.Client
// implements it.
type Engine interface {
	LoadImageFile(ctx context.Context, path string) ([]string, error)
	Ping(ctx context.Context) (engineclient.PingInfo, error)
}

// LoadedFunc is told the image names each archive loaded.
type LoadedFunc func(ctx context.Context, rel string, names []string)

// Deployer deploys the files of an upload into the engine.
type Deployer struct {
	engine   Engine
	logger   *slog.Logger
	onLoaded LoadedFunc
}

// New returns a Deployer that loads image archives into engine, logs the
// loaded image names and returns them to the processor, which records them.
// onLoaded, when not nil, is also told about them.
func New(engine Engine, logger *slog.Logger, onLoaded LoadedFunc) *Deployer {
	return &Deployer{engine: engine, logger: logger, onLoaded: onLoaded}
}

// IsImageArchive reports whether the file at rel is deployed as an image
// archive: *.tar, *.tar.gz and *.tgz, in any letter case.
func IsImageArchive(rel string) bool {
	name := strings.ToLower(path.Base(rel))
	for _, suffix := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
			return true
		}
	}
	return false
}

// Deploy loads the image archive at absPath into the engine and returns the
// names of the images it loaded.
//
// A file of another type is processor.ErrUnsupported, without contacting the
// engine. An unreachable engine wraps processor.ErrUnavailable, so the upload
// waits and this file is deployed again later. Anything else the engine
// refuses (a corrupt archive: 400 or 500) is an error for this file alone.
func (d *Deployer) Deploy(ctx context.Context, rel, absPath string) ([]string, error) {
	if !IsImageArchive(rel) {
		return nil, processor.ErrUnsupported
	}
	names, err := d.engine.LoadImageFile(ctx, absPath)
	if errors.Is(err, engineclient.ErrUnavailable) {
		return nil, fmt.Errorf("%w: %w", processor.ErrUnavailable, err)
	}
	if err != nil {
		var apiErr *engineclient.Error
		if errors.As(err, &apiErr) {
			return nil, fmt.Errorf("image archive refused by the engine (%d): %s", apiErr.Status, apiErr.Message)
		}
		return nil, fmt.Errorf("loading image archive: %w", err)
	}
	d.logger.InfoContext(ctx, "image archive loaded", "file", rel, "images", names)
	if d.onLoaded != nil {
		d.onLoaded(ctx, rel, names)
	}
	return names, nil
}

// readyTimeout bounds the readiness check, so a probe gets its answer in
// time even when connections to the engine hang.
const readyTimeout = 2 * time.Second

// Ready is the readiness check of the engine: it fails while the engine does
// not answer its ping.
func (d *Deployer) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	_, err := d.engine.Ping(ctx)
	return err
}
