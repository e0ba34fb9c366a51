// Package server is the HTTP plumbing both Berth services share: listening on
// tcp:// or unix:// addresses, structured logging, graceful shutdown, request
// ids, panic recovery, access logs, Prometheus metrics and health probes.
//
// Every middleware here that wraps the http.ResponseWriter keeps http.Flusher
// and http.Hijacker working and implements Unwrap, so streaming responses,
// hijacked attach sessions and http.NewResponseController pass through.
package server
