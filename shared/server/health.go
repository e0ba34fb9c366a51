package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"
)

// checkTimeout bounds each readiness check, so a hung dependency makes the
// probe fail instead of hang.
const checkTimeout = 5 * time.Second

// Check reports whether one dependency is usable; nil means ready.
type Check func(ctx context.Context) error

// healthBody is the JSON body of the probes.
type healthBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// Healthz answers 200 {"status":"ok"} as long as the process serves HTTP:
// the liveness probe.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, http.StatusOK, healthBody{Status: "ok"})
	})
}

// Readyz runs every check concurrently, each bounded by a timeout, and
// answers 200 {"status":"ok","checks":{name:"ok"}} when all pass, else 503
// {"status":"unavailable","checks":{...}} where each failing check carries its
// error text: the readiness probe.
func Readyz(checks map[string]Check) http.Handler {
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		results := make([]error, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
				defer cancel()
				results[i] = runCheck(ctx, checks[name])
			}()
		}
		wg.Wait()
		body := healthBody{Status: "ok", Checks: make(map[string]string, len(names))}
		status := http.StatusOK
		for i, name := range names {
			if results[i] != nil {
				body.Checks[name] = results[i].Error()
				body.Status = "unavailable"
				status = http.StatusServiceUnavailable
				continue
			}
			body.Checks[name] = "ok"
		}
		writeHealth(w, status, body)
	})
}

// runCheck runs check, turning a nil check into success.
func runCheck(ctx context.Context, check Check) error {
	if check == nil {
		return nil
	}
	return check(ctx)
}

// writeHealth writes a probe answer; probes must never be cached.
func writeHealth(w http.ResponseWriter, status int, body healthBody) {
	encoded, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(encoded, '\n'))
}
