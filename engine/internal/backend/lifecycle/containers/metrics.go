package containers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-project/berth/engine/internal/core"
)

// metrics are the container backend's Prometheus metrics.
type metrics struct {
	durations *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "berth_engine_operation_duration_seconds",
		Help:    "Duration of container operations (create, start, stop, remove), errors included.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"operation"})}
}

// observe records one operation; use as defer m.metrics.observe("start", time.Now()).
func (x *metrics) observe(operation string, start time.Time) {
	x.durations.WithLabelValues(operation).Observe(time.Since(start).Seconds())
}

// stateCollector exports berth_engine_containers{state}.
type stateCollector struct {
	m    *Manager
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{"created": 0, "initialized": 0, "running": 0, "paused": 0, "exited": 0}
	c.m.mu.RLock()
	for _, e := range c.m.byID {
		st := e.rec.State
		if st == core.StateStopped {
			st = core.StateExited
		}
		counts[st.String()]++
	}
	c.m.mu.RUnlock()
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), state)
	}
}

// RegisterMetrics adds berth_engine_containers{state} and
// berth_engine_operation_duration_seconds{operation} to reg.
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error {
	if err := reg.Register(m.metrics.durations); err != nil {
		return err
	}
	return reg.Register(stateCollector{m: m, desc: prometheus.NewDesc("berth_engine_containers",
		"Containers by state (created, initialized, running, paused, exited).", []string{"state"}, nil)})
}
