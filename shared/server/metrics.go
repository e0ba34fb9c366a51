package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-project/berth/shared/buildinfo"
)

// UnmatchedRoute is the route label of requests no chi route matched, which
// keeps the label's cardinality bounded whatever paths clients try.
const UnmatchedRoute = "unmatched"

// Metrics holds a service's Prometheus registry and its HTTP metrics. Each
// service builds its own, so tests can run several servers in one process.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// NewMetrics returns metrics named <namespace>_http_... in a new registry
// that also holds the Go runtime and process collectors and
// berth_build_info{version,commit,goversion} (always 1).
func NewMetrics(namespace string) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "http_requests_total",
			Help:      "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "http_request_duration_seconds",
			Help:      "Time from receiving a request to its handler returning, by route pattern and method.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"route", "method"}),
		streams: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "http_stream_duration_seconds",
			Help:      "How long streamed (flushed before the end) and hijacked responses lasted, by route pattern and method; kept out of http_request_duration_seconds, whose latency they are not.",
			Buckets:   []float64{0.1, 1, 10, 60, 300, 900, 3600, 4 * 3600},
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "http_requests_in_flight",
			Help:      "HTTP requests being served now.",
		}),
	}
	build := buildinfo.Get()
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "berth_build_info",
		Help: "The build of this Berth service (always 1): version, commit and Go version.",
	}, []string{"version", "commit", "goversion"})
	buildInfo.WithLabelValues(build.Version, build.Commit, build.GoVersion).Set(1)
	m.registry.MustRegister(
		buildInfo,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.duration, m.streams, m.inFlight,
	)
	return m
}

// Registry returns the registry, for a service's own collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	return m.registry
}

// Handler serves the registry in the Prometheus exposition format at /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Middleware counts and times requests by chi route pattern (such as
// "/v1/uploads/{uuid}"), method and status code. It works both inside a chi
// router (Use) and wrapped around one: in the latter case it hands the router
// a route context to fill. Methods other than the standard ones are counted
// as "OTHER" so clients cannot grow the label set.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()

		routeCtx := chi.RouteContext(r.Context())
		if routeCtx == nil {
			routeCtx = chi.NewRouteContext()
			r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, routeCtx))
		}
		rec := newRecorder(w)
		completed := false
		defer func() {
			route := routeLabel(routeCtx.RoutePattern())
			method := methodLabel(r.Method)
			took := time.Since(start).Seconds()
			if rec.hijacked || rec.flushed {
				m.streams.WithLabelValues(route, method).Observe(took)
			} else {
				m.duration.WithLabelValues(route, method).Observe(took)
			}
			m.requests.WithLabelValues(route, method, codeLabel(rec, completed)).Inc()
		}()
		next.ServeHTTP(rec, r)
		completed = true
	})
}

// routeLabel is a chi route pattern as a label: UnmatchedRoute when no
// route matched, and without the regular expressions of parameters
// ("/images/{name:.*}/push" is "/images/{name}/push").
func routeLabel(pattern string) string {
	if pattern == "" {
		return UnmatchedRoute
	}
	var b strings.Builder
	depth := 0
	skipping := false
	for _, c := range pattern {
		switch {
		case c == '{':
			depth++
			if depth == 1 {
				skipping = false
			}
		case c == '}':
			depth--
			if depth == 0 {
				skipping = false
			}
		case c == ':' && depth == 1:
			skipping = true
		}
		if skipping && depth >= 1 {
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// codeLabel is the status code label: "hijacked" for a connection taken over
// before any status was written, 500 for a handler that panicked before
// answering, 200 for one that returned without writing.
func codeLabel(rec *responseRecorder, completed bool) string {
	switch {
	case rec.Status() != 0:
		return strconv.Itoa(rec.Status())
	case rec.hijacked:
		return "hijacked"
	case !completed:
		return strconv.Itoa(http.StatusInternalServerError)
	default:
		return strconv.Itoa(http.StatusOK)
	}
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	default:
		return "OTHER"
	}
}
