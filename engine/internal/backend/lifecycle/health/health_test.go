package health

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/lifecycle/exec"
	"github.com/berth-project/berth/engine/internal/core"
)

func TestCommand(t *testing.T) {
	tests := []struct {
		test []string
		want []string
	}{
		{nil, nil},
		{[]string{"NONE"}, nil},
		{[]string{"CMD"}, nil},
		{[]string{"CMD", "true"}, []string{"true"}},
		{[]string{"CMD-SHELL", "exit", "1"}, []string{"/bin/sh", "-c", "exit 1"}},
		{[]string{"CMD-SHELL"}, nil},
		{[]string{"/bin/check", "-v"}, []string{"/bin/check", "-v"}},
	}
	for _, tt := range tests {
		if got := Command(tt.test); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Command(%q) = %q, want %q", tt.test, got, tt.want)
		}
	}
}

func TestApply(t *testing.T) {
	ok := core.HealthCheckLog{ExitCode: 0}
	fail := core.HealthCheckLog{ExitCode: 1}
	h := core.HealthCheckResults{Status: Starting}
	// Each step applies a result to the state the step before left.
	for _, step := range []struct {
		what          string
		result        core.HealthCheckLog
		inStartPeriod bool
		status        string
		streak        int
	}{
		{"failure in start period counted", fail, true, Starting, 0},
		{"one failure of two allowed", fail, false, Starting, 1},
		{"retries reached", fail, false, Unhealthy, 2},
		{"success resets", ok, false, Healthy, 0},
	} {
		h = apply(h, step.result, step.inStartPeriod, 2, 5)
		if h.Status != step.status || h.FailingStreak != step.streak {
			t.Fatalf("%s: %+v", step.what, h)
		}
	}
	for i := 0; i < 10; i++ {
		h = apply(h, core.HealthCheckLog{Output: strconv.Itoa(i)}, false, 2, 5)
	}
	if len(h.Log) != 5 || h.Log[4].Output != "9" {
		t.Fatalf("log not bounded to the last entries: %+v", h.Log)
	}
	// healthMaxLogCount 0: every result is kept; 2: the last two.
	for i := 0; i < 10; i++ {
		h = apply(h, core.HealthCheckLog{Output: strconv.Itoa(i)}, false, 2, 0)
	}
	if len(h.Log) != 15 {
		t.Fatalf("unbounded log kept %d entries, want 15", len(h.Log))
	}
	h = apply(h, core.HealthCheckLog{Output: "last"}, false, 2, 2)
	if len(h.Log) != 2 || h.Log[1].Output != "last" || h.Log[0].Output != "9" {
		t.Fatalf("log bounded to 2: %+v", h.Log)
	}
}

func TestLimitedBuffer(t *testing.T) {
	for _, tc := range []struct{ limit, want int }{{500, 500}, {7, 7}, {0, 1000}} {
		b := exec.CappedOutput{Limit: outputLimit(tc.limit)}
		for i := 0; i < 100; i++ {
			if n, err := b.Write([]byte("0123456789")); n != 10 || err != nil {
				t.Fatal("short write")
			}
		}
		if len(b.String()) != tc.want {
			t.Errorf("limit %d: kept %d bytes, want %d", tc.limit, len(b.String()), tc.want)
		}
	}
}
