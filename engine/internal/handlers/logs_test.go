package handlers

import (
	"testing"
	"time"
)

func TestParseInputTime(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		in    string
		since bool
		want  time.Time
		bad   bool
	}{
		{in: "2024-01-02T03:04:05Z", want: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
		{in: "2024-01-02T03:04:05.5+01:00", want: time.Date(2024, 1, 2, 2, 4, 5, 5e8, time.UTC)},
		{in: "2024-01-02T03:04:05", want: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
		{in: "2024-01-02", want: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)},
		{in: "1700000000", want: time.Unix(1700000000, 0)},
		{in: "1700000000.25", want: time.Unix(1700000000, 25e7)},
		{in: "10m", since: true, want: now.Add(-10 * time.Minute)},
		{in: "10m", since: false, want: now.Add(10 * time.Minute)},
		{in: "yesterday", bad: true},
		{in: "", bad: true},
		{in: "NaN", bad: true},
		{in: "1e300", bad: true},
	}
	for _, tt := range tests {
		got, err := parseInputTime(tt.in, tt.since, now)
		if tt.bad {
			if err == nil {
				t.Errorf("parseInputTime(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseInputTime(%q, %v) = %v, %v; want %v", tt.in, tt.since, got, err, tt.want)
		}
	}
}

func FuzzParseInputTime(f *testing.F) {
	for _, s := range []string{"2024-01-02T03:04:05Z", "1700000000.5", "-5s", "2024-01-02Z07:00", "1e11"} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseInputTime(s, true, now)
		if err != nil {
			return
		}
		// Only durations depend on the direction; absolute forms do not.
		other, err := parseInputTime(s, false, now)
		if err != nil {
			t.Fatalf("%q parsed for since but not for until: %v", s, err)
		}
		if _, derr := time.ParseDuration(s); derr != nil && !other.Equal(got) {
			t.Fatalf("%q: since %v, until %v", s, got, other)
		}
		if d, derr := time.ParseDuration(s); derr == nil && !got.Equal(other) && !got.Equal(now.Add(-d)) {
			t.Fatalf("%q: duration counted wrongly: %v", s, got)
		}
	})
}
