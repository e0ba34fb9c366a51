package imagestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/containers/image/v5/docker/reference"

	"github.com/berth-project/berth/engine/internal/core"
)

// scpTarget is a parsed ImageScp destination.
type scpTarget struct {
	// engine is the other engine's base URL; nil for a local copy.
	engine *url.URL
	// name is the name to give the image there; "" keeps the source's names.
	name string
}

// parseScpDestination reads "NAME" (a local copy), "URL" or "URL::[NAME]"
// where URL is tcp://, http://, https:// or unix:// of another engine.
func parseScpDestination(dest string) (scpTarget, error) {
	if dest == "" {
		return scpTarget{}, core.InvalidArgument("destination", errors.New("must name a local image or another engine (tcp://HOST:PORT::[NAME])"))
	}
	engine, name := dest, ""
	if i := strings.LastIndex(dest, "::"); i >= 0 {
		engine, name = dest[:i], dest[i+2:]
	} else if !strings.Contains(dest, "://") {
		engine = ""
		name = dest
	}
	target := scpTarget{name: name}
	if name != "" {
		if _, err := localName(name); err != nil {
			return scpTarget{}, core.InvalidArgument("destination", fmt.Errorf("image name %q: %w", name, err))
		}
	}
	if engine == "" {
		if name == "" {
			return scpTarget{}, core.InvalidArgument("destination", errors.New("names neither an engine nor an image"))
		}
		return target, nil
	}
	u, err := url.Parse(engine)
	if err != nil {
		return scpTarget{}, core.InvalidArgument("destination", fmt.Errorf("engine URL %q: %w", engine, err))
	}
	switch u.Scheme {
	case "tcp", "http", "https":
		if u.Host == "" {
			return scpTarget{}, core.InvalidArgument("destination", fmt.Errorf("engine URL %q has no host", engine))
		}
	case "unix":
		if u.Path == "" {
			return scpTarget{}, core.InvalidArgument("destination", fmt.Errorf("engine URL %q has no socket path", engine))
		}
	default:
		return scpTarget{}, core.InvalidArgument("destination", fmt.Errorf("engine URL %q: scheme must be tcp, http, https or unix (ssh connections are not supported)", engine))
	}
	target.engine = u
	return target, nil
}

// Scp copies a local image to another local name or into another engine,
// which receives it as a docker-archive through its ImagesLoad endpoint.
func (t *Transfer) Scp(ctx context.Context, source, destination string) (_ string, err error) {
	defer t.observe("scp", time.Now(), &err)
	target, err := parseScpDestination(destination)
	if err != nil {
		return "", err
	}
	src, err := t.exportSource(ctx, source)
	if err != nil {
		return "", err
	}
	var rename reference.NamedTagged
	if target.name != "" {
		named, err := localName(target.name)
		if err != nil {
			return "", core.InvalidArgument("destination", err)
		}
		tagged, ok := named.(reference.NamedTagged)
		if !ok {
			return "", core.InvalidArgument("destination", fmt.Errorf("%q: a copy is named by tag, not by digest", target.name))
		}
		rename = tagged
	}
	if target.engine == nil {
		img, err := t.store.Lookup(ctx, source)
		if err != nil {
			return "", err
		}
		if err := t.store.Storage().AddNames(img.ID, []string{rename.String()}); err != nil {
			return "", fmt.Errorf("naming image: %w", err)
		}
		t.store.Changed()
		return rename.String(), nil
	}
	if rename != nil {
		src.name = rename
	}
	archive, err := t.exportDockerArchive(ctx, t.systemContext(), []exportSource{src})
	if err != nil {
		return "", err
	}
	defer archive.Close()
	names, err := loadIntoEngine(ctx, target.engine, archive)
	if err != nil {
		return "", err
	}
	return strings.Join(names, ","), nil
}

// scpLoadPath is the ImagesLoad route of the receiving engine. Podman
// serves libpod routes only under a version prefix (the bare /libpod/... is
// 404 there); 4.0.0 is the oldest libpod API both Podman 4 and 5 accept.
const scpLoadPath = "/v4.0.0/libpod/images/load"

// loadIntoEngine posts a docker-archive to another engine's ImagesLoad.
func loadIntoEngine(ctx context.Context, engine *url.URL, archive io.Reader) ([]string, error) {
	client := &http.Client{Timeout: scpTimeout}
	base := *engine
	switch base.Scheme {
	case "tcp":
		base.Scheme = "http"
	case "unix":
		socket := base.Path
		client.Transport = &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		}
		base = url.URL{Scheme: "http", Host: "d"}
	}
	base.Path = strings.TrimSuffix(base.Path, "/") + scpLoadPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.String(), archive)
	if err != nil {
		return nil, core.InvalidArgument("destination", err)
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sending the image to %s: %w", engine.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", engine.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		var engineErr struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &engineErr) == nil && engineErr.Message != "" {
			msg = engineErr.Message
		}
		return nil, fmt.Errorf("engine %s refused the image (%s): %s", engine.Redacted(), resp.Status, msg)
	}
	var report struct {
		Names []string `json:"Names"`
	}
	if err := json.Unmarshal(body, &report); err != nil || len(report.Names) == 0 {
		return nil, fmt.Errorf("engine %s answered the load without image names: %q", engine.Redacted(), truncate(string(body), 200))
	}
	return report.Names, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// scpTimeout bounds an scp to another engine that stops answering.
const scpTimeout = 30 * time.Minute
