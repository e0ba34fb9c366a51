package imagestore

import (
	"errors"
	"testing"
	"time"

	"github.com/containers/image/v5/docker/reference"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestParseReference(t *testing.T) {
	cases := []struct {
		in, named, path string
		short           bool
	}{
		{"busybox", "docker.io/library/busybox:latest", "busybox", true},
		{"busybox:1", "docker.io/library/busybox:1", "busybox", true},
		{"team/app:2", "docker.io/team/app:2", "team/app", true},
		{"localhost/app", "localhost/app:latest", "app", false},
		{"quay.io/org/app:3", "quay.io/org/app:3", "org/app", false},
		{"127.0.0.1:5000/app:1", "127.0.0.1:5000/app:1", "app", false},
		{"app@sha256:" + sixtyFour, "docker.io/library/app@sha256:" + sixtyFour, "app", true},
	}
	for _, c := range cases {
		ref, err := ParseReference(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if ref.Named.String() != c.named || ref.Short != c.short || ref.Path != c.path {
			t.Errorf("%q: got %s short=%v path=%q", c.in, ref.Named, ref.Short, ref.Path)
		}
	}
	for _, bad := range []string{"", "UPPER", "a b", "a::b", "app@sha256:short", ":tag", "-lead", "a/", strings64("x") + "/" + "y@"} {
		if _, err := ParseReference(bad); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: error %v, want an invalid argument", bad, err)
		}
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func strings64(s string) string {
	out := ""
	for len(out) < 64 {
		out += s
	}
	return out
}

func TestCandidatesOfShortNames(t *testing.T) {
	s := &Store{searchRegs: []string{"registry.example"}}
	ref, err := ParseReference("team/app:1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.candidates(ref) {
		got = append(got, c.String())
	}
	want := []string{"localhost/team/app:1", "registry.example/team/app:1", "docker.io/team/app:1"}
	if len(got) != len(want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("candidate %d: %s, want %s", i, got[i], want[i])
		}
	}
}

func TestParseTimestamp(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Time{
		"1h":                   now.Add(-time.Hour),
		"1700000000":           time.Unix(1700000000, 0),
		"2024-01-02T03:04:05Z": time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		"2024-01-02":           time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
	}
	for in, want := range cases {
		got, err := ParseTimestamp(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "soon", "2024-13-01", "NaN", "Inf"} {
		if _, err := ParseTimestamp(bad, now); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseReference(f *testing.F) {
	for _, seed := range []string{"busybox", "localhost/app:1", "quay.io/a/b@sha256:" + sixtyFour, "UPPER", "a:b:c", "", "x/../y", "127.0.0.1:5000/app", "a@b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ref, err := ParseReference(in)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%q: error %v is not an invalid argument", in, err)
			}
			return
		}
		// What parses is fully qualified and parses again to itself.
		again, err := reference.ParseNamed(ref.Named.String())
		if err != nil || again.String() != ref.Named.String() {
			t.Fatalf("%q: normalized %q does not parse back (%v)", in, ref.Named, err)
		}
		if ref.Short && hasDomain(in) {
			t.Fatalf("%q: short but has a registry", in)
		}
	})
}

func FuzzParseTimestamp(f *testing.F) {
	for _, seed := range []string{"1h", "1700000000", "2024-01-02", "1.5", "-3m", "NaN", "1e400"} {
		f.Add(seed)
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = ParseTimestamp(in, now)
	})
}
