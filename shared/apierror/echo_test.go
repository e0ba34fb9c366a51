package apierror

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEcho(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantLen int
	}{
		{"short/path", len("short/path")},
		{strings.Repeat("a", MaxEcho), MaxEcho},
		{strings.Repeat("a", 70000), MaxEcho + len("… (70000 bytes)")},
		{strings.Repeat("é", 200), -1},
	} {
		got := Echo(tc.in)
		if tc.wantLen >= 0 && len(got) != tc.wantLen {
			t.Errorf("Echo(%d bytes) is %d bytes, want %d", len(tc.in), len(got), tc.wantLen)
		}
		if len(got) > MaxEcho+32 || !utf8.ValidString(got) {
			t.Errorf("Echo(%d bytes) = %d bytes, valid UTF-8 %v", len(tc.in), len(got), utf8.ValidString(got))
		}
	}
}
