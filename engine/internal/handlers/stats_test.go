package handlers

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
)

// TestStatsReportAppendJSON: the stats line written without reflection is
// byte for byte what encoding/json writes (with the Encoder's newline
// added by the stream).
func TestStatsReportAppendJSON(t *testing.T) {
	for _, r := range []statsReport{
		{},
		{Stats: []stats.ContainerStats{}},
		{Stats: []stats.ContainerStats{{ContainerID: "a1", Name: "c-1", CPU: 12.5, MemLimit: 1 << 30, PerCPU: []uint64{1, 2}}}},
		{Stats: []stats.ContainerStats{{Name: "one"}, {Name: "<two>", AvgCPU: 1e-9, UpTime: -5}}},
		{Error: &struct{}{}, Stats: []stats.ContainerStats{{Name: "x"}}},
	} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(r); err != nil {
			t.Fatal(err)
		}
		got := append(r.AppendJSON(nil), '\n')
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got, want.Bytes())
		}
	}
}

// BenchmarkStatsReport50 encodes a stats line of 50 containers both ways.
func BenchmarkStatsReport50(b *testing.B) {
	r := statsReport{Stats: make([]stats.ContainerStats, 50)}
	for i := range r.Stats {
		r.Stats[i] = stats.ContainerStats{ContainerID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			Name: "bench-stats-" + string(rune('a'+i%26)), CPU: 0.123456 * float64(i), AvgCPU: 1.5, MemUsage: 1 << 20,
			MemLimit: 3 << 30, MemPerc: 0.0321, CPUNano: 123456789, SystemNano: 1764201600123456789, PIDs: 1}
	}
	b.Run("encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			if err := enc.Encode(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = r.AppendJSON(buf[:0])
		}
	})
}
