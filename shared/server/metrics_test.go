package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/shared/buildinfo"
)

// scrape returns the exposition text of m's /metrics handler.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics answered %d", rec.Code)
	}
	return rec.Body.String()
}

func assertContains(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

func TestMetricsInsideChiRouter(t *testing.T) {
	m := NewMetrics("berth_uploads")
	router := chi.NewRouter()
	router.Use(m.Middleware)
	router.Get("/v1/uploads/{uuid}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "{}") })
	router.Route("/v1/uploads/{uuid}/files", func(r chi.Router) {
		r.Put("/*", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	})
	router.Handle("/metrics", m.Handler())

	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/v1/uploads/1", nil),
		httptest.NewRequest(http.MethodGet, "/v1/uploads/2", nil),
		httptest.NewRequest(http.MethodPut, "/v1/uploads/3/files/a/b.tar", nil),
		httptest.NewRequest(http.MethodGet, "/no/such/path", nil),
		httptest.NewRequest("BREW", "/v1/uploads/1", nil),
	} {
		router.ServeHTTP(httptest.NewRecorder(), req)
	}
	rec := httptest.NewRecorder()
	router.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	text := rec.Body.String()
	assertContains(t, text,
		`berth_uploads_http_requests_total{code="200",method="GET",route="/v1/uploads/{uuid}"} 2`,
		`berth_uploads_http_requests_total{code="204",method="PUT",route="/v1/uploads/{uuid}/files/*"} 1`,
		`berth_uploads_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`berth_uploads_http_requests_total{code="405",method="OTHER",route="unmatched"} 1`,
		`berth_uploads_http_request_duration_seconds_count{method="GET",route="/v1/uploads/{uuid}"} 2`,
		`berth_uploads_http_request_duration_seconds_bucket{method="GET",route="/v1/uploads/{uuid}",le="+Inf"} 2`,
		"go_goroutines ",
		"process_",
	)
	if strings.Contains(text, `route="/v1/uploads/1"`) {
		t.Error("a raw path became a route label")
	}
}

func TestMetricsWrappedAroundRouter(t *testing.T) {
	m := NewMetrics("berth_engine")
	router := chi.NewRouter()
	router.Get("/v{version}/libpod/containers/{name}/json", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such container", http.StatusNotFound)
	})
	h := m.Middleware(router)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v4.3.1/libpod/containers/web/json", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v5.0.0/libpod/containers/db/json", nil))
	assertContains(t, scrape(t, m),
		`berth_engine_http_requests_total{code="404",method="GET",route="/v{version}/libpod/containers/{name}/json"} 2`)
}

func TestMetricsInFlight(t *testing.T) {
	m := NewMetrics("berth_uploads")
	entered := make(chan struct{})
	release := make(chan struct{})
	router := chi.NewRouter()
	router.Use(m.Middleware)
	router.Get("/slow", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	srv := httptest.NewServer(router)
	defer srv.Close()

	assertContains(t, scrape(t, m), "berth_uploads_http_requests_in_flight 0")
	done := make(chan struct{})
	for i := 0; i < 2; i++ {
		go func() {
			resp, err := http.Get(srv.URL + "/slow")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- struct{}{}
		}()
		<-entered
	}
	assertContains(t, scrape(t, m), "berth_uploads_http_requests_in_flight 2")
	close(release)
	<-done
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(scrape(t, m), "berth_uploads_http_requests_in_flight 0") {
		if time.Now().After(deadline) {
			t.Fatalf("in-flight gauge did not return to 0:\n%s", scrape(t, m))
		}
		time.Sleep(10 * time.Millisecond)
	}
	assertContains(t, scrape(t, m), `berth_uploads_http_requests_total{code="200",method="GET",route="/slow"} 2`)
}

func TestMetricsPanicCountedAs500(t *testing.T) {
	m := NewMetrics("berth_engine")
	router := chi.NewRouter()
	router.Use(Recover(nil, nil), m.Middleware)
	router.Get("/boom", func(w http.ResponseWriter, r *http.Request) { panic("bug") })
	router.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/boom", nil))
	assertContains(t, scrape(t, m), `berth_engine_http_requests_total{code="500",method="GET",route="/boom"} 1`)
}

func TestMetricsRegistriesAreIndependent(t *testing.T) {
	first, second := NewMetrics("berth_engine"), NewMetrics("berth_engine")
	first.Middleware(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if strings.Contains(scrape(t, second), "berth_engine_http_requests_total{") {
		t.Fatal("a request on one Metrics showed up in another")
	}
	if first.Registry() == second.Registry() {
		t.Fatal("shared registry")
	}
}

func TestMetricsBuildInfo(t *testing.T) {
	b := buildinfo.Get()
	want := `berth_build_info{commit="` + b.Commit + `",goversion="` + b.GoVersion + `",version="` + b.Version + `"} 1`
	assertContains(t, scrape(t, NewMetrics("berth_engine")), want)
}

func TestRouteLabel(t *testing.T) {
	for in, want := range map[string]string{
		"":                       UnmatchedRoute,
		"/v1/uploads/{uuid}":     "/v1/uploads/{uuid}",
		"/images/{name:.*}/push": "/images/{name}/push",
		"/v{version}/libpod/images/{name:[a-z]{2,}}/json": "/v{version}/libpod/images/{name}/json",
		"/files/*": "/files/*",
	} {
		if got := routeLabel(in); got != want {
			t.Errorf("routeLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStreamsAreNotLatency: a response that streams (flushes before the
// end) or a hijacked connection goes into http_stream_duration_seconds,
// not into the latency histogram, so a followed log or an attach session
// does not make the request latency look slow; regex route parameters do
// not show in the route label.
func TestStreamsAreNotLatency(t *testing.T) {
	m := NewMetrics("berth_engine")
	router := chi.NewRouter()
	// served counts the requests the metrics middleware is done with:
	// httptest's Close does not wait for a handler that hijacked its
	// connection.
	var served sync.WaitGroup
	router.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer served.Done()
			next.ServeHTTP(w, r)
		})
	})
	router.Use(m.Middleware)
	router.Get("/containers/{name}/logs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "line")
		http.NewResponseController(w).Flush()
		fmt.Fprintln(w, "line")
	})
	router.Post("/containers/{name}/attach", func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	router.Get("/images/{name:.*}/json", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "{}") })
	srv := httptest.NewServer(router)
	for _, req := range []struct{ method, path string }{
		{"GET", "/containers/a/logs"}, {"POST", "/containers/a/attach"}, {"GET", "/images/busybox/json"},
	} {
		served.Add(1)
		r, _ := http.NewRequest(req.method, srv.URL+req.path, nil)
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
		}
	}
	// The client may have the whole answer before the middleware, after
	// the handler returns, has recorded it.
	recorded := make(chan struct{})
	go func() { served.Wait(); close(recorded) }()
	select {
	case <-recorded:
	case <-time.After(10 * time.Second):
		t.Fatal("the middleware did not finish the three requests in 10 s")
	}
	srv.Close()
	text := scrape(t, m)
	assertContains(t, text,
		`berth_engine_http_stream_duration_seconds_count{method="GET",route="/containers/{name}/logs"} 1`,
		`berth_engine_http_stream_duration_seconds_count{method="POST",route="/containers/{name}/attach"} 1`,
		`berth_engine_http_request_duration_seconds_count{method="GET",route="/images/{name}/json"} 1`,
		`berth_engine_http_requests_total{code="hijacked",method="POST",route="/containers/{name}/attach"} 1`,
	)
	for _, unwanted := range []string{
		`berth_engine_http_request_duration_seconds_count{method="GET",route="/containers/{name}/logs"}`,
		`berth_engine_http_request_duration_seconds_count{method="POST",route="/containers/{name}/attach"}`,
		`{name:.*}`,
	} {
		if strings.Contains(text, unwanted) {
			t.Errorf("metrics hold %s", unwanted)
		}
	}
}
