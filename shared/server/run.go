package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// shuttingDownKey is the context key of the channel ShuttingDown returns.
type shuttingDownKey struct{}

// ShuttingDown returns a channel that is closed when the server that is
// serving the request begins to shut down. Handlers of endless streams
// (events, followed logs, stats) select on it to end their stream, so that
// graceful shutdown does not have to wait for its timeout. Outside Run it
// returns nil, which blocks forever in a select.
func ShuttingDown(ctx context.Context) <-chan struct{} {
	done, _ := ctx.Value(shuttingDownKey{}).(chan struct{})
	return done
}

// Run serves h on ln until ctx is done, then shuts down gracefully: it stops
// accepting, lets in-flight requests finish for up to shutdownTimeout, and
// then cancels the remaining requests' contexts and closes their
// connections. Request contexts are not cancelled by ctx itself, so a
// request in flight at shutdown is answered. Run returns nil after a clean
// shutdown, an error when serving failed or the timeout forced connections
// closed. Run closes ln.
//
// Run applies DefaultLimits (see RunWithLimits).
func Run(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, shutdownTimeout time.Duration) error {
	return RunWithLimits(ctx, ln, h, logger, shutdownTimeout, DefaultLimits)
}

// RunWithLimits is Run with limits on slow and numerous clients: header and
// idle timeouts, body read deadlines that move with progress and a minimum
// body rate, and caps on connections and on the bodies of one client, at
// which stalled bodies are shed first (503 only when none is stalled).
func RunWithLimits(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, shutdownTimeout time.Duration, limits Limits) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	shuttingDown := make(chan struct{})
	baseCtx, cancelBase := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), shuttingDownKey{}, shuttingDown))
	defer cancelBase()
	if limits.MaxConns == 0 {
		limits.MaxConns = connsForDescriptors()
	}
	tracked := newBodies(limits)
	if limits.MaxConns > 0 {
		ln = &limitListener{Listener: ln, max: limits.MaxConns, bodies: tracked}
	}
	if limits.TLS != nil {
		ln = tls.NewListener(ln, limits.TLS)
	}
	srv := &http.Server{
		Handler:           guardBodies(h, limits, tracked),
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		IdleTimeout:       limits.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("serving", "addr", listenerAddr(ln))

	select {
	case err := <-serveErr:
		ln.Close()
		return fmt.Errorf("serve on %s: %w", listenerAddr(ln), err)
	case <-ctx.Done():
	}

	logger.Info("shutting down", "addr", listenerAddr(ln), "timeout", shutdownTimeout)
	close(shuttingDown)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(shutdownCtx)
	if shutdownErr != nil {
		cancelBase()
		srv.Close()
		logger.Warn("shutdown timeout reached, closed remaining connections", "timeout", shutdownTimeout)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", listenerAddr(ln), err)
	}
	if shutdownErr != nil {
		return fmt.Errorf("graceful shutdown: %w", shutdownErr)
	}
	logger.Info("stopped", "addr", listenerAddr(ln))
	return nil
}

// listenerAddr renders ln's address with its scheme, as Listen takes it.
func listenerAddr(ln net.Listener) string {
	addr := ln.Addr()
	switch addr.Network() {
	case "unix":
		return "unix://" + addr.String()
	case "tcp":
		return "tcp://" + addr.String()
	default:
		return addr.Network() + "://" + addr.String()
	}
}
