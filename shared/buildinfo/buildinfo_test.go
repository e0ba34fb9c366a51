package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestGetDefaultsAndLinkTimeValues(t *testing.T) {
	got := Get()
	if got.Version == "" || got.Commit == "" || got.GoVersion != runtime.Version() {
		t.Fatalf("defaults: %+v", got)
	}
	version, commit = "1.2.3", "abc123"
	defer func() { version, commit = "", "" }()
	got = Get()
	if got.Version != "1.2.3" || got.Commit != "abc123" {
		t.Fatalf("link-time values: %+v", got)
	}
	if s := got.String("berth-engine"); !strings.HasPrefix(s, "berth-engine 1.2.3 (commit abc123, go") {
		t.Fatalf("String: %q", s)
	}
}
