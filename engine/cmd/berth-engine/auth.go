package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/berth-project/berth/shared/apierror"
	"github.com/berth-project/berth/shared/auth"
	"github.com/berth-project/berth/shared/server"
)

// authFlags are the command line of the API's authentication.
type authFlags struct {
	tlsCert, tlsKey, tlsClientCA string
	tokensFile                   string
	insecure                     bool
}

// register adds the flags to fs; each defaults to its environment variable.
func (a *authFlags) register(fs *flag.FlagSet, env func(key, fallback string) string) {
	fs.StringVar(&a.tlsCert, "tls-cert", env("BERTH_ENGINE_TLS_CERT", ""), "PEM certificate to serve a tcp:// listener with TLS; needs --tls-key (BERTH_ENGINE_TLS_CERT)")
	fs.StringVar(&a.tlsKey, "tls-key", env("BERTH_ENGINE_TLS_KEY", ""), "PEM private key of --tls-cert (BERTH_ENGINE_TLS_KEY)")
	fs.StringVar(&a.tlsClientCA, "tls-client-ca", env("BERTH_ENGINE_TLS_CLIENT_CA", ""), "PEM CA certificates; the API then requires a client certificate they signed, or a bearer token (BERTH_ENGINE_TLS_CLIENT_CA)")
	fs.StringVar(&a.tokensFile, "tokens-file", env("BERTH_ENGINE_TOKENS_FILE", ""), "file of bearer tokens, one a line; the API then requires one, or a client certificate (BERTH_ENGINE_TOKENS_FILE)")
	insecure, _ := strconv.ParseBool(env("BERTH_ENGINE_INSECURE", "false"))
	fs.BoolVar(&a.insecure, "insecure", insecure, "allow a tcp:// listener on a non-loopback address without client authentication (BERTH_ENGINE_INSECURE)")
}

// check refuses inconsistent flags.
func (a *authFlags) check(listen string) error {
	if (a.tlsCert == "") != (a.tlsKey == "") {
		return errors.New("tls-cert and tls-key go together")
	}
	if a.tlsClientCA != "" && a.tlsCert == "" {
		return errors.New("tls-client-ca needs tls-cert and tls-key")
	}
	if a.tlsCert != "" && !isTCP(listen) {
		return fmt.Errorf("tls-cert: TLS is served on tcp:// listeners only, not on %s", listen)
	}
	return nil
}

func isTCP(listen string) bool {
	return len(listen) > 6 && listen[:6] == "tcp://"
}

// apiAuth is what the API listener requires of clients.
type apiAuth struct {
	tls        *tls.Config
	clientCert bool
	tokens     *auth.Tokens
}

// newAPIAuth loads the certificates and tokens and decides whether serving
// on ln is allowed: a TCP listener on a non-loopback address must
// authenticate its clients (a client CA or tokens) unless insecure is set,
// which is logged as a warning. Unix sockets are guarded by their file
// permissions and need neither.
func newAPIAuth(a authFlags, ln net.Listener, logger *slog.Logger) (apiAuth, error) {
	var aa apiAuth
	var err error
	if a.tlsCert != "" {
		if aa.tls, err = auth.ServerTLS(a.tlsCert, a.tlsKey, a.tlsClientCA); err != nil {
			return aa, err
		}
		aa.clientCert = a.tlsClientCA != ""
	}
	if a.tokensFile != "" {
		tokens, err := auth.LoadTokens(a.tokensFile)
		if err != nil {
			return aa, err
		}
		aa.tokens = auth.NewTokens(tokens)
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok || tcp.IP.IsLoopback() {
		return aa, nil
	}
	authenticated := aa.clientCert || aa.tokens != nil
	switch {
	case !authenticated && !a.insecure:
		return aa, fmt.Errorf("refusing to serve the API on non-loopback address %s without client authentication: give --tls-cert, --tls-key and --tls-client-ca, or --tokens-file (or --insecure to accept that anyone who reaches it is root)", tcp)
	case !authenticated:
		logger.Warn("INSECURE: serving the API without client authentication on a non-loopback address; anyone who reaches it can run containers as root", "addr", tcp.String())
	case aa.tls == nil:
		logger.Warn("bearer tokens travel in clear text: serve with --tls-cert and --tls-key", "addr", tcp.String())
	}
	return aa, nil
}

// limits are the server limits with the listener's TLS.
func (aa apiAuth) limits() server.Limits {
	l := server.DefaultLimits
	l.TLS = aa.tls
	return l
}

// openPaths answer without authentication: liveness, readiness and the
// Docker-style ping, for probes that cannot present a credential, and the
// metrics, which Prometheus scrapes (they hold counts, no secrets).
var openPaths = map[string]bool{"/_ping": true, "/healthz": true, "/readyz": true, "/metrics": true}

// handler wraps h so that every request except those to openPaths carries a
// verified client certificate or a valid bearer token, when either is
// configured; 401 with the engine's JSON error body otherwise.
func (aa apiAuth) handler(h http.Handler) http.Handler {
	if !aa.clientCert && aa.tokens == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openPaths[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			h.ServeHTTP(w, r)
			return
		}
		if aa.clientCert && auth.ClientVerified(r.TLS) {
			h.ServeHTTP(w, r)
			return
		}
		if token, ok := auth.Bearer(r); ok && aa.tokens != nil && aa.tokens.Valid(token) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="berth-engine"`)
		apierror.WriteEngine(w, http.StatusUnauthorized, errUnauthenticated(aa, r))
	})
}

// errUnauthenticated says what the request lacked.
func errUnauthenticated(aa apiAuth, r *http.Request) error {
	var want string
	switch {
	case aa.clientCert && aa.tokens != nil:
		want = "a client certificate signed by the engine's client CA or an Authorization: Bearer token"
	case aa.clientCert:
		want = "a client certificate signed by the engine's client CA"
	default:
		want = "an Authorization: Bearer token"
	}
	if r.Header.Get("Authorization") != "" {
		return fmt.Errorf("unauthorized: the bearer token is not valid; the API requires %s", want)
	}
	return fmt.Errorf("unauthorized: the API requires %s", want)
}
