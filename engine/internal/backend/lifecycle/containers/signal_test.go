package containers

import (
	"errors"
	"syscall"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestParseSignal(t *testing.T) {
	tests := map[string]syscall.Signal{
		"": syscall.SIGKILL, "KILL": syscall.SIGKILL, "SIGKILL": syscall.SIGKILL, "sigterm": syscall.SIGTERM,
		"term": syscall.SIGTERM, "9": syscall.SIGKILL, "10": syscall.SIGUSR1, "SIGUSR1": syscall.SIGUSR1,
		"RTMIN": 34, "SIGRTMIN+3": 37, "RTMAX": 64, "RTMAX-2": 62, "HUP": syscall.SIGHUP,
	}
	for in, want := range tests {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("%q: got %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0", "65", "-1", "NOPE", "SIGRTMIN+40", "RTMAX+1", "1.5"} {
		if _, err := ParseSignal(bad); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: got %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// FuzzParseSignal: any input gives a signal in 1..64 or a 400.
func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"KILL", "SIGTERM", "9", "RTMIN+2", "RTMAX-1", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if sig < 1 || sig > 64 {
			t.Fatalf("%q: signal %d out of range", s, sig)
		}
	})
}
