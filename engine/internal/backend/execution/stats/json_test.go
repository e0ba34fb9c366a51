package stats

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// sameAsEncodingJSON fails unless AppendJSON writes what json.Marshal does.
func sameAsEncodingJSON(t *testing.T, c ContainerStats) {
	t.Helper()
	want, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	got := c.AppendJSON([]byte("prefix"))
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("AppendJSON differs from encoding/json:\n got %s\nwant prefix%s", got, want)
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	floats := []float64{0, 1, -1, 0.5, 12.345678901234567, 1e-6, 9.99e-7, 1.5e-7, 1e-10, 1e20, 1e21, 3.2e22,
		-2.5e-8, math.SmallestNonzeroFloat64, math.MaxFloat64, 100, 0.1 + 0.2, 33.333333333333336}
	strs := []string{"", "c-1", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		`a"b`, `back\slash`, "<html>&", "tab\there", "nl\n", "ünïcödé", "\u2028sep\u2029", "bad\xffutf8", "\x00\x1f\x7f"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		c := ContainerStats{
			AvgCPU:        floats[rng.IntN(len(floats))],
			ContainerID:   strs[rng.IntN(len(strs))],
			Name:          strs[rng.IntN(len(strs))],
			CPU:           rng.Float64() * math.Pow(10, float64(rng.IntN(50)-25)),
			CPUNano:       rng.Uint64(),
			CPUSystemNano: rng.Uint64() >> rng.IntN(64),
			SystemNano:    uint64(time.Now().UnixNano()),
			MemUsage:      rng.Uint64(),
			MemLimit:      math.MaxUint64,
			MemPerc:       floats[rng.IntN(len(floats))],
			NetInput:      rng.Uint64() >> 10,
			NetOutput:     0,
			BlockInput:    rng.Uint64() >> 20,
			BlockOutput:   1,
			PIDs:          uint64(rng.IntN(4096)),
			UpTime:        time.Duration(int64(rng.Uint64())), // negative too
			Duration:      rng.Uint64(),
		}
		switch i % 3 {
		case 1:
			c.PerCPU = []uint64{}
		case 2:
			c.PerCPU = []uint64{rng.Uint64(), 0, 42}
		}
		if rng.IntN(2) == 0 {
			c.CPU = -c.CPU
		}
		sameAsEncodingJSON(t, c)
	}
}

// FuzzAppendJSON checks the hand-written encoding against encoding/json
// for any name and figures (NaN and infinities aside, which
// encoding/json refuses).
func FuzzAppendJSON(f *testing.F) {
	f.Add("c-1", "0123abcd", 1.5, 1e-7, 3e21, uint64(7), int64(-3))
	f.Add(`<"x">&`, "\xff", 0.0, math.Copysign(0, -1), 123456.789, uint64(math.MaxUint64), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, name, id string, cpu, avg, perc float64, n uint64, up int64) {
		for _, v := range []float64{cpu, avg, perc} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Skip()
			}
		}
		sameAsEncodingJSON(t, ContainerStats{Name: name, ContainerID: id, CPU: cpu, AvgCPU: avg, MemPerc: perc,
			CPUNano: n, PIDs: n >> 3, UpTime: time.Duration(up), PerCPU: []uint64{n}})
	})
}

func TestAppendJSONWritesNullForNaN(t *testing.T) {
	c := ContainerStats{CPU: math.NaN(), MemPerc: math.Inf(1)}
	var v map[string]any
	if err := json.Unmarshal(c.AppendJSON(nil), &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if v["CPU"] != nil || v["MemPerc"] != nil {
		t.Fatalf("CPU %v, MemPerc %v: want null", v["CPU"], v["MemPerc"])
	}
}
