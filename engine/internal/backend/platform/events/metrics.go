package events

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-project/berth/engine/internal/core"
)

// busMetrics count outcomes as the engine publishes them: every event, the
// readers dropped for lagging, and from the events themselves exec sessions
// ended, healthcheck results and container exits.
type busMetrics struct {
	published *prometheus.CounterVec
	dropped   prometheus.Counter
	execs     *prometheus.CounterVec
	health    *prometheus.CounterVec
	exits     *prometheus.CounterVec
}

func newBusMetrics() *busMetrics {
	return &busMetrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_engine_events_published_total",
			Help: "Events stored and delivered to live readers, by type and action.",
		}, []string{"type", "action"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_engine_event_readers_dropped_total",
			Help: "Live event streams ended because their reader lagged more than 512 events behind.",
		}),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_engine_exec_sessions_ended_total",
			Help: "Exec sessions that ended, by exit code class (see container exits).",
		}, []string{"code_class"}),
		health: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_engine_healthcheck_results_total",
			Help: "Healthcheck results, by status (healthy, unhealthy, starting).",
		}, []string{"status"}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_engine_container_exits_total",
			Help: "Container exits, by exit code class: 0, 1-125 (the program's failure), 126 (not executable), 127 (not found), signal (128+n), other.",
		}, []string{"code_class"}),
	}
}

// observe counts one published event.
func (m *busMetrics) observe(e Event) {
	m.published.WithLabelValues(e.Type, e.Status).Inc()
	if e.Type != TypeContainer {
		return
	}
	switch e.Status {
	case StatusExecDied:
		m.execs.WithLabelValues(codeClass(e.ExitCode)).Inc()
	case StatusHealthStatus:
		m.health.WithLabelValues(e.HealthStatus).Inc()
	case string(core.EventDied):
		m.exits.WithLabelValues(codeClass(e.ExitCode)).Inc()
	}
}

// codeClass groups exit codes the way an operator reads them.
func codeClass(code int) string {
	switch {
	case code == 0:
		return "0"
	case code >= 1 && code <= 125:
		return "1-125"
	case code == 126 || code == 127:
		return strconv.Itoa(code)
	case code > 128 && code < 256:
		return "signal"
	default:
		return "other"
	}
}

// RegisterMetrics adds the bus's counters to registry.
func (b *Bus) RegisterMetrics(registry prometheus.Registerer) error {
	m := b.metrics
	return errors.Join(
		registry.Register(m.published), registry.Register(m.dropped),
		registry.Register(m.execs), registry.Register(m.health), registry.Register(m.exits),
	)
}
