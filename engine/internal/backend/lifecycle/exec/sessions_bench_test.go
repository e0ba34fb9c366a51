package exec

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// runningContainer is a core.Containers whose every lookup finds one
// running container: exec's bookkeeping measured without a runtime.
type runningContainer struct{ core.Containers }

func (runningContainer) Lookup(context.Context, string) (*core.Container, error) {
	return &core.Container{ID: "c1", State: core.StateRunning}, nil
}

// managerWithEnded is a Manager over a real state database holding n
// sessions of container c1 that ended within the retention period.
func managerWithEnded(tb testing.TB, n int) *Manager {
	tb.Helper()
	ctx := context.Background()
	db, err := state.Open(ctx, filepath.Join(tb.TempDir(), "state.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := db.AddContainer(ctx, state.ContainerRecord{ID: "c1", Name: "c1", State: "running", Created: time.Now(), Data: []byte("{}")}); err != nil {
		tb.Fatal(err)
	}
	m := NewManager(runningContainer{}, db, nil, nil)
	cfg := Config{Cmd: []string{"sh", "-c", "echo one two three"}, AttachStdout: true, AttachStderr: true, Env: []string{"A=1", "B=2"}}
	for i := 0; i < n; i++ {
		s := &Session{ID: fmt.Sprintf("%064d", i), ContainerID: "c1", Config: cfg, Created: time.Now(), Started: true, Exited: time.Now()}
		if err := m.put(ctx, s); err != nil {
			tb.Fatal(err)
		}
	}
	if err := m.Recover(ctx); err != nil {
		tb.Fatal(err)
	}
	return m
}

// createLatency is the median exec create latency over rounds creates.
func createLatency(tb testing.TB, m *Manager, rounds int) time.Duration {
	tb.Helper()
	cfg := Config{Cmd: []string{"true"}}
	d := make([]time.Duration, rounds)
	for i := range d {
		start := time.Now()
		if _, err := m.Create(context.Background(), "c1", cfg); err != nil {
			tb.Fatal(err)
		}
		d[i] = time.Since(start)
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// TestExecCreateIsFlatInEndedSessions: exec create does not slow down with
// the number of ended sessions kept for inspection (before: every create
// decoded all of them, 1.2 -> 21 ms after 1,600).
func TestExecCreateIsFlatInEndedSessions(t *testing.T) {
	few := createLatency(t, managerWithEnded(t, 10), 40)
	many := createLatency(t, managerWithEnded(t, 3000), 40)
	t.Logf("exec create median: %v with 10 ended sessions, %v with 3000", few, many)
	if many > 4*few+2*time.Millisecond {
		t.Errorf("exec create median %v with 3000 ended sessions vs %v with 10: not O(1)", many, few)
	}
}

// BenchmarkExecCreateWith3000Ended measures exec create beside 3,000
// ended sessions.
func BenchmarkExecCreateWith3000Ended(b *testing.B) {
	m := managerWithEnded(b, 3000)
	cfg := Config{Cmd: []string{"true"}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Create(context.Background(), "c1", cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecInspectWith3000Ended measures exec inspect beside 3,000
// ended sessions.
func BenchmarkExecInspectWith3000Ended(b *testing.B) {
	m := managerWithEnded(b, 3000)
	id, err := m.Create(context.Background(), "c1", Config{Cmd: []string{"true"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Inspect(context.Background(), id); err != nil {
			b.Fatal(err)
		}
	}
}
