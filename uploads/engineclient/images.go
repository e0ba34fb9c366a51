package engineclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// maxJSONBody bounds how much of a successful JSON response is decoded.
const maxJSONBody = 4 << 20

// PingInfo is what the engine tells about itself in the headers of _ping.
type PingInfo struct {
	// APIVersion is the Docker-compatible API version (Api-Version header).
	APIVersion string
	// LibpodAPIVersion is the libpod API version (Libpod-Api-Version header).
	LibpodAPIVersion string
}

// Ping checks that the engine answers. It is the readiness probe of uploads.
func (c *Client) Ping(ctx context.Context) (PingInfo, error) {
	resp, cancel, err := c.do(ctx, request{method: http.MethodGet, path: "/_ping", timeout: c.timeout})
	if err != nil {
		return PingInfo{}, err
	}
	defer cancel()
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return PingInfo{
		APIVersion:       resp.Header.Get("Api-Version"),
		LibpodAPIVersion: resp.Header.Get("Libpod-Api-Version"),
	}, nil
}

// Opener yields a fresh reader of the same content on every call, so a
// request body can be sent again after a failed connection.
type Opener func() (io.ReadCloser, error)

// LoadImage loads the image archive (docker-archive or oci-archive, possibly
// compressed) that open yields into the engine's store and returns the names
// of the loaded images. open is called once per attempt.
// A corrupt archive is an *Error matching ErrBadRequest or ErrServer.
func (c *Client) LoadImage(ctx context.Context, open Opener) ([]string, error) {
	return c.loadImage(ctx, request{body: open})
}

// LoadImageFile loads the image archive at path; the file is reopened for
// every attempt.
func (c *Client) LoadImageFile(ctx context.Context, path string) ([]string, error) {
	return c.LoadImage(ctx, func() (io.ReadCloser, error) { return os.Open(path) })
}

// LoadImageReader loads the image archive read from r. r cannot be rewound,
// so the request is retried only if the connection failed before anything of
// r was read.
func (c *Client) LoadImageReader(ctx context.Context, r io.Reader) ([]string, error) {
	counted := &countingReader{r: r}
	return c.loadImage(ctx, request{
		body:       func() (io.ReadCloser, error) { return io.NopCloser(counted), nil },
		replayable: func() bool { return counted.n.Load() == 0 },
	})
}

func (c *Client) loadImage(ctx context.Context, req request) ([]string, error) {
	req.method, req.path = http.MethodPost, "/images/load"
	req.contentType = "application/x-tar"
	req.timeout = c.loadTimeout
	resp, cancel, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	var report struct {
		Names []string `json:"Names"`
	}
	if err := decodeJSON(resp, &report); err != nil {
		return nil, fmt.Errorf("engine POST /images/load: %w", err)
	}
	return report.Names, nil
}

// ImageExists reports whether the engine has an image of that name or ID.
func (c *Client) ImageExists(ctx context.Context, name string) (bool, error) {
	path, err := imagePath(name, "/exists")
	if err != nil {
		return false, err
	}
	resp, cancel, err := c.do(ctx, request{method: http.MethodGet, path: path, timeout: c.timeout})
	if err != nil {
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			return false, nil
		}
		return false, err
	}
	defer cancel()
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return true, nil
}

// Image is what uploads needs to know about an image in the engine.
type Image struct {
	ID          string            `json:"Id"`
	Digest      string            `json:"Digest"`
	RepoTags    []string          `json:"RepoTags"`
	RepoDigests []string          `json:"RepoDigests"`
	Created     time.Time         `json:"Created"`
	Size        int64             `json:"Size"`
	Labels      map[string]string `json:"Labels"`
}

// InspectImage returns the image of that name or ID; an unknown image is an
// *Error matching ErrNotFound.
func (c *Client) InspectImage(ctx context.Context, name string) (Image, error) {
	path, err := imagePath(name, "/json")
	if err != nil {
		return Image{}, err
	}
	resp, cancel, err := c.do(ctx, request{method: http.MethodGet, path: path, timeout: c.timeout})
	if err != nil {
		return Image{}, err
	}
	defer cancel()
	defer resp.Body.Close()
	var image Image
	if err := decodeJSON(resp, &image); err != nil {
		return Image{}, fmt.Errorf("engine GET %s: %w", path, err)
	}
	return image, nil
}

// imagePath builds /images/{name}{suffix}. Image references contain slashes
// (localhost/busybox:latest) and are sent as they are; empty names and "."
// or ".." segments are refused before anything is sent.
func imagePath(name, suffix string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty image name", ErrBadRequest)
	}
	for _, segment := range strings.Split(name, "/") {
		if segment == "" || segment == "." || segment == ".." || strings.ContainsAny(segment, "?#\x00") {
			return "", fmt.Errorf("%w: invalid image name %q", ErrBadRequest, name)
		}
	}
	return "/images/" + name + suffix, nil
}

// decodeJSON decodes a successful response body into v.
func decodeJSON(resp *http.Response, v any) error {
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBody)).Decode(v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// countingReader counts the bytes read through it.
// The transport reads a request body in its own goroutine, hence the atomic.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
