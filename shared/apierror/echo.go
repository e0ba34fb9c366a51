package apierror

import (
	"fmt"
	"unicode/utf8"
)

// MaxEcho is how many bytes of client input (a path, a name) an error body
// repeats: enough to recognize it, never the 70,000-byte path of a hostile
// request.
const MaxEcho = 256

// Echo returns s for an error message, cut to MaxEcho bytes (on a UTF-8
// boundary) with the original length said when it was longer.
func Echo(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
