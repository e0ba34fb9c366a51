// Package engineclient is the typed client of the berth-engine (libpod) API.
// It is the only way the uploads service reaches the engine: everything that
// crosses that boundary (ping, image load, image exists and inspect, quadlet
// install, kube play) goes through a Client, so the Pact contract in
// contracts/ pins exactly what uploads depends on.
package engineclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berth-project/berth/shared/auth"
)

// DefaultAPIPrefix is the versioned libpod prefix the client calls under.
const DefaultAPIPrefix = "/v4.0.0/libpod"

// Config describes how to reach the engine.
type Config struct {
	// URL of the engine: tcp://host:port, http://host:port, https://host:port
	// or unix:///path/to/socket.
	URL string
	// APIPrefix is prepended to every path; DefaultAPIPrefix when empty.
	APIPrefix string
	// Timeout bounds each short request (ping, exists, inspect), including
	// its retries; 30s when zero.
	Timeout time.Duration
	// LoadTimeout bounds one image load, including its retries; 30m when zero.
	LoadTimeout time.Duration
	// DialTimeout bounds establishing one connection; 5s when zero.
	DialTimeout time.Duration
	// Attempts is how many times a request is tried when the connection to
	// the engine fails; 3 when zero. HTTP error responses are never retried.
	Attempts int
	// Backoff is the wait before the first retry; it doubles for each
	// further retry. 200ms when zero.
	Backoff time.Duration
	// UserAgent is sent with every request; "berth-uploads" when empty.
	UserAgent string
	// CAFile holds the PEM CAs an https:// engine's certificate must chain
	// to; the system's when empty.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and key presented
	// to an https:// engine that requires one (--tls-client-ca).
	CertFile, KeyFile string
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
}

// Client calls the engine API. It is safe for concurrent use.
type Client struct {
	http        *http.Client
	base        *url.URL
	prefix      string
	timeout     time.Duration
	loadTimeout time.Duration
	attempts    int
	backoff     time.Duration
	userAgent   string
	token       string
}

// New returns a Client for cfg. It does not contact the engine.
func New(cfg Config) (*Client, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = 30 * time.Minute
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "berth-uploads"
	}
	prefix := cfg.APIPrefix
	if prefix == "" {
		prefix = DefaultAPIPrefix
	}
	prefix = "/" + strings.Trim(prefix, "/")

	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 nil, // the engine is always reached directly
		DialContext:           dialer.DialContext,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		ExpectContinueTimeout: time.Second,
	}

	parsed, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("engine url %q: %w", cfg.URL, err)
	}
	base := &url.URL{}
	if parsed.Scheme != "https" && (cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "") {
		return nil, fmt.Errorf("engine url %q: a CA or client certificate needs an https:// url", cfg.URL)
	}
	switch parsed.Scheme {
	case "tcp", "http":
		if parsed.Host == "" {
			return nil, fmt.Errorf("engine url %q: missing host:port", cfg.URL)
		}
		base.Scheme, base.Host = "http", parsed.Host
	case "https":
		if parsed.Host == "" {
			return nil, fmt.Errorf("engine url %q: missing host:port", cfg.URL)
		}
		base.Scheme, base.Host = "https", parsed.Host
		if transport.TLSClientConfig, err = auth.ClientTLS(cfg.CAFile, cfg.CertFile, cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("engine url %q: %w", cfg.URL, err)
		}
	case "unix":
		socket := parsed.Path
		if socket == "" {
			socket = parsed.Opaque
		}
		if socket == "" {
			return nil, fmt.Errorf("engine url %q: missing socket path", cfg.URL)
		}
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		}
		// The host is only used in the Host header; the dialer ignores it.
		base.Scheme, base.Host = "http", "d"
	default:
		return nil, fmt.Errorf("engine url %q: scheme must be tcp, http, https or unix", cfg.URL)
	}

	return &Client{
		http:        &http.Client{Transport: transport},
		base:        base,
		prefix:      prefix,
		timeout:     cfg.Timeout,
		loadTimeout: cfg.LoadTimeout,
		attempts:    cfg.Attempts,
		backoff:     cfg.Backoff,
		userAgent:   cfg.UserAgent,
		token:       cfg.Token,
	}, nil
}

// Close releases idle connections.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
}

// endpoint builds the URL of path (relative to the API prefix) with query.
func (c *Client) endpoint(path string, query url.Values) string {
	u := *c.base
	u.Path = c.prefix + path
	u.RawQuery = query.Encode()
	return u.String()
}

// request is one logical call to the engine; body, when set, is opened
// afresh for every attempt.
type request struct {
	method string
	path   string
	query  url.Values
	body   func() (io.ReadCloser, error)
	// replayable reports whether body can be opened again after a failed
	// attempt; nil means always.
	replayable  func() bool
	contentType string
	timeout     time.Duration
}

// do sends req, retrying with backoff while the connection to the engine
// fails, and returns the response of the first attempt that got one. A
// non-2xx response is turned into an *Error and its body closed. The caller
// closes the body of a successful response; cancel releases the request's
// timeout and must be called after the body has been read.
func (c *Client) do(ctx context.Context, req request) (resp *http.Response, cancel context.CancelFunc, err error) {
	ctx, cancel = context.WithTimeout(ctx, req.timeout)
	target := c.endpoint(req.path, req.query)
	wait := c.backoff
	for attempt := 1; ; attempt++ {
		var retryable bool
		resp, retryable, err = c.once(ctx, req, target)
		if err == nil {
			break
		}
		if req.replayable != nil && !req.replayable() {
			retryable = false
		}
		if !errors.Is(err, ErrUnavailable) || !retryable || attempt >= c.attempts {
			cancel()
			return nil, nil, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			cancel()
			return nil, nil, err
		case <-timer.C:
		}
		wait *= 2
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		return nil, nil, decodeError(req.method, req.path, resp)
	}
	return resp, cancel, nil
}

// once performs a single attempt. retryable reports whether a failure may be
// retried as far as the attempt itself is concerned (the body's replayability
// is checked by do).
func (c *Client) once(ctx context.Context, req request, target string) (*http.Response, bool, error) {
	var body io.ReadCloser
	if req.body != nil {
		opened, err := req.body()
		if err != nil {
			return nil, false, fmt.Errorf("%s %s: open request body: %w", req.method, req.path, err)
		}
		body = opened
	}
	httpReq, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, false, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	if body != nil && req.contentType != "" {
		httpReq.Header.Set("Content-Type", req.contentType)
	}
	httpReq.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		httpReq.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(httpReq)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// Our own deadline or the caller's cancellation: the engine did
			// not answer in time, which is also unavailability, but never
			// worth another attempt.
			return nil, false, &unavailableError{op: req.method + " " + req.path, err: ctxErr}
		}
		return nil, true, &unavailableError{op: req.method + " " + req.path, err: err}
	}
	return resp, true, nil
}

// unavailableError is a connection-level failure: no HTTP response came back.
type unavailableError struct {
	op  string
	err error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("engine unavailable: %s: %v", e.op, e.err)
}

func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
