package engineclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// QuadletInstallOptions are the query parameters of InstallQuadlets that
// uploads sets.
type QuadletInstallOptions struct {
	// Replace installs over a quadlet of the same name (replace=true).
	Replace bool
	// Activate turns the unit into the engine objects it describes
	// (activate=true): image pulled, network or volume created, container,
	// pod or kube YAML started.
	Activate bool
}

// QuadletReport is the engine's answer to InstallQuadlets.
type QuadletReport struct {
	// Installed maps each installed file of the archive to where the engine
	// keeps it.
	Installed map[string]string `json:"InstalledQuadlets"`
	// Errors maps files of the archive to why they were not installed.
	Errors map[string]string `json:"QuadletErrors"`
}

// InstallQuadlets sends a tar archive holding one quadlet unit and the files
// it references (open yields it afresh for every attempt) to the engine's
// InstallQuadlets. A unit the engine refuses (bad syntax, unknown key, a
// second unit) is an *Error matching ErrBadRequest; a name already installed
// without Replace matches ErrConflict.
func (c *Client) InstallQuadlets(ctx context.Context, open Opener, opts QuadletInstallOptions) (QuadletReport, error) {
	query := url.Values{}
	if opts.Replace {
		query.Set("replace", "true")
	}
	if opts.Activate {
		query.Set("activate", "true")
	}
	req := request{
		method: http.MethodPost, path: "/quadlets", query: query, body: open,
		contentType: "application/x-tar", timeout: c.loadTimeout,
	}
	resp, cancel, err := c.do(ctx, req)
	if err != nil {
		return QuadletReport{}, err
	}
	defer cancel()
	defer resp.Body.Close()
	var report QuadletReport
	if err := decodeJSON(resp, &report); err != nil {
		return QuadletReport{}, fmt.Errorf("engine POST /quadlets: %w", err)
	}
	return report, nil
}

// KubePlayOptions are the query parameters of KubePlay that uploads sets.
type KubePlayOptions struct {
	// Replace tears down the pods, containers and volumes a previous play of
	// the same YAML created before creating them again (replace=true).
	Replace bool
}

// KubePlayReport is the part of the engine's KubePlay answer uploads reads.
type KubePlayReport struct {
	Pods []KubePlayPod `json:"Pods"`
	// Volumes are the named volumes the play created.
	Volumes []struct {
		Name string `json:"Name"`
	} `json:"Volumes"`
}

// KubePlayPod is one pod a KubePlay created.
type KubePlayPod struct {
	ID             string   `json:"ID"`
	Containers     []string `json:"Containers"`
	InitContainers []string `json:"InitContainers"`
	// ContainerErrors are the errors of containers that were created but
	// did not start.
	ContainerErrors []string `json:"ContainerErrors"`
}

// KubePlay sends Kubernetes YAML (open yields it afresh for every attempt)
// to the engine's KubePlay, which creates and starts what it describes. YAML
// the engine cannot play (not Kubernetes, an unknown kind, a missing image)
// is an *Error matching ErrBadRequest.
func (c *Client) KubePlay(ctx context.Context, open Opener, opts KubePlayOptions) (KubePlayReport, error) {
	query := url.Values{}
	if opts.Replace {
		query.Set("replace", "true")
	}
	req := request{
		method: http.MethodPost, path: "/kube/play", query: query, body: open,
		contentType: "application/yaml", timeout: c.loadTimeout,
	}
	resp, cancel, err := c.do(ctx, req)
	if err != nil {
		return KubePlayReport{}, err
	}
	defer cancel()
	defer resp.Body.Close()
	var report KubePlayReport
	if err := decodeJSON(resp, &report); err != nil {
		return KubePlayReport{}, fmt.Errorf("engine POST /kube/play: %w", err)
	}
	return report, nil
}
