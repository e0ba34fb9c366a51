package events

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestOutcomeCounters: exec sessions, healthcheck results and container
// exits are counted by class as their events are published, and a reader
// that lags is counted when it is dropped.
func TestOutcomeCounters(t *testing.T) {
	b := newBus(t)
	ctx := context.Background()
	c := &core.Container{ID: "c1", Name: "one", Image: "busybox"}
	b.ExecEvent(ctx, c, "s1", []string{"true"}, StatusExecDied, 0)
	b.ExecEvent(ctx, c, "s2", []string{"nope"}, StatusExecDied, 127)
	b.HealthEvent(ctx, c, core.HealthCheckResults{Status: "unhealthy"})
	for _, code := range []int32{0, 1, 137} {
		b.ContainerHook(ctx, core.ContainerEvent{Type: core.EventDied, ID: "c1", Name: "one", ExitCode: &code})
	}
	m := b.metrics
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"exec 0", testutil.ToFloat64(m.execs.WithLabelValues("0")), 1},
		{"exec 127", testutil.ToFloat64(m.execs.WithLabelValues("127")), 1},
		{"unhealthy", testutil.ToFloat64(m.health.WithLabelValues("unhealthy")), 1},
		{"exit 0", testutil.ToFloat64(m.exits.WithLabelValues("0")), 1},
		{"exit 1", testutil.ToFloat64(m.exits.WithLabelValues("1-125")), 1},
		{"exit signal", testutil.ToFloat64(m.exits.WithLabelValues("signal")), 1},
		{"died published", testutil.ToFloat64(m.published.WithLabelValues(TypeContainer, "died")), 3},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	for code, want := range map[int]string{0: "0", 2: "1-125", 126: "126", 127: "127", 128: "other", 143: "signal", -1: "other"} {
		if got := codeClass(code); got != want {
			t.Errorf("codeClass(%d) = %s, want %s", code, got, want)
		}
	}
}
