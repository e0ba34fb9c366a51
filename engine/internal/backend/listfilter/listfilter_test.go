package listfilter

import (
	"testing"
	"time"
)

func TestHasLabel(t *testing.T) {
	labels := map[string]string{"app": "web", "empty": ""}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{"app", true}, {"app=web", true}, {"app=db", false}, {"empty", true},
		{"empty=", true}, {"missing", false}, {"missing=", false},
	} {
		if got := HasLabel(labels, tc.filter); got != tc.want {
			t.Errorf("HasLabel(%q) = %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestUntil(t *testing.T) {
	before := time.Now()
	for _, tc := range []struct {
		value string
		want  func(time.Time) bool
	}{
		{"1h", func(got time.Time) bool { d := before.Sub(got); return d > 59*time.Minute && d < 61*time.Minute }},
		{"1700000000", func(got time.Time) bool { return got.Equal(time.Unix(1700000000, 0)) }},
		{"1700000000.5", func(got time.Time) bool { return got.Equal(time.Unix(1700000000, 5e8)) }},
		{"2024-01-02T03:04:05Z", func(got time.Time) bool { return got.Equal(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)) }},
		{"2024-01-02T03:04:05", func(got time.Time) bool { return got.Equal(time.Date(2024, 1, 2, 3, 4, 5, 0, time.Local)) }},
		{"2024-01-02", func(got time.Time) bool { return got.Equal(time.Date(2024, 1, 2, 0, 0, 0, 0, time.Local)) }},
	} {
		got, err := Until(tc.value)
		if err != nil || !tc.want(got) {
			t.Errorf("Until(%q) = %v, %v", tc.value, got, err)
		}
	}
	for _, bad := range []string{"", "yesterday", "2024-13-01", "1h-"} {
		if _, err := Until(bad); err == nil {
			t.Errorf("Until(%q) accepted", bad)
		}
	}
}
