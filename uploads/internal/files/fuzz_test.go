package files

import (
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

// FuzzValidatePath checks that whatever ValidatePath and FromEscaped accept is a valid
// io/fs path (or the root) free of backslashes, NUL and percent-encoded escapes.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"", ".", "a/b", "..", "a//b", "/a", "a\x00", "a\\b", "%2e%2e", "%252e", "a%2fb", "ü/ß"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		check := func(name, got string) {
			if got == Root {
				return
			}
			if !fs.ValidPath(got) || strings.ContainsAny(got, "\\\x00") {
				t.Fatalf("%s(%q) accepted invalid %q", name, p, got)
			}
			d := got
			for range maxUnescapeRounds {
				next, err := url.PathUnescape(d)
				if err != nil || next == d {
					break
				}
				if !fs.ValidPath(next) || strings.ContainsAny(next, "\\\x00") || strings.Count(next, "/") != strings.Count(got, "/") {
					t.Fatalf("%s(%q) accepted %q that decodes to %q", name, p, got, next)
				}
				d = next
			}
		}
		if got, err := ValidatePath(p); err == nil {
			if got != p && !(p == "" && got == Root) {
				t.Fatalf("ValidatePath(%q) changed the path to %q", p, got)
			}
			check("ValidatePath", got)
		}
		if got, err := FromEscaped(p); err == nil {
			check("FromEscaped", got)
		}
	})
}
