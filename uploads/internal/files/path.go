// Package files keeps the file tree of every upload under the data directory: path
// validation of client-supplied names, atomic writes (temporary file, fsync, rename),
// listings with marker paging, and accounting of sizes for the upload limits. All access
// goes through os.Root, so no symbolic link can lead outside an upload's tree.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/berth-project/berth/shared/apierror"
)

// Root is the normalized name of an upload's top directory.
const Root = "."

// MaxSegment is the longest file or directory name the file system stores (NAME_MAX).
const MaxSegment = 255

// ErrInvalidPath reports a client-supplied path that is not a valid relative slash path.
var ErrInvalidPath = errors.New("invalid path")

// PathError says why a path was refused; it wraps ErrInvalidPath.
type PathError struct {
	Path   string
	Reason string
}

// Error quotes the path, cut to apierror.MaxEcho bytes.
func (e *PathError) Error() string {
	return fmt.Sprintf("invalid path %q: %s", apierror.Echo(e.Path), e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidPath) true.
func (e *PathError) Unwrap() error { return ErrInvalidPath }

// maxUnescapeRounds bounds how often ValidatePath peels percent-encoding looking for a
// hidden "..", "/", "\" or NUL (for example "%252e%252e" decodes twice to "..").
const maxUnescapeRounds = 4

// ValidatePath checks a decoded path from a URL against the io/fs.ValidPath rules (no
// "..", no leading or trailing "/", no empty segments, no "." segment except the root)
// and refuses backslashes, NUL and other control characters, invalid UTF-8, and names
// that spell one of those in percent-encoding. The empty path and "." are the root and
// come back as ".".
func ValidatePath(p string) (string, error) {
	if p == "" || p == Root {
		return Root, nil
	}
	if err := checkPlain(p); err != nil {
		return "", err
	}
	decoded := p
	for range maxUnescapeRounds {
		if !strings.Contains(decoded, "%") {
			break
		}
		next, err := url.PathUnescape(decoded)
		if err != nil || next == decoded {
			break
		}
		if next == "" || next == Root {
			return "", &PathError{Path: p, Reason: "percent-encoded root"}
		}
		if strings.Count(next, "/") != strings.Count(decoded, "/") {
			return "", &PathError{Path: p, Reason: "percent-encoded slash"}
		}
		if err := checkPlain(next); err != nil {
			return "", &PathError{Path: p, Reason: "percent-encoded form: " + err.(*PathError).Reason}
		}
		decoded = next
	}
	return p, nil
}

func checkPlain(p string) error {
	if !utf8.ValidString(p) {
		return &PathError{Path: p, Reason: "not valid UTF-8"}
	}
	for _, c := range p {
		switch {
		case c == 0:
			return &PathError{Path: p, Reason: "contains NUL"}
		case c == '\\':
			return &PathError{Path: p, Reason: "contains a backslash"}
		case c < 0x20 || c == 0x7f:
			return &PathError{Path: p, Reason: "contains a control character"}
		}
	}
	if strings.HasPrefix(p, "/") {
		return &PathError{Path: p, Reason: "leading slash"}
	}
	if !fs.ValidPath(p) {
		return &PathError{Path: p, Reason: "empty, \".\" or \"..\" segment"}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if len(seg) > MaxSegment {
			return &PathError{Path: p, Reason: fmt.Sprintf("a segment is longer than %d bytes", MaxSegment)}
		}
	}
	return nil
}

// FromEscaped extracts and validates the path from the escaped (on-the-wire) form of a URL
// suffix, decoding it segment by segment so that an encoded slash ("%2F") cannot join or
// split segments behind the validator's back.
func FromEscaped(escaped string) (string, error) {
	if escaped == "" {
		return Root, nil
	}
	segments := strings.Split(escaped, "/")
	for i, s := range segments {
		d, err := url.PathUnescape(s)
		if err != nil {
			return "", &PathError{Path: escaped, Reason: "bad percent-encoding"}
		}
		if strings.Contains(d, "/") {
			return "", &PathError{Path: escaped, Reason: "encoded slash"}
		}
		if d != s && (d == "." || d == "..") {
			return "", &PathError{Path: escaped, Reason: "percent-encoded dot segment"}
		}
		segments[i] = d
	}
	return ValidatePath(strings.Join(segments, "/"))
}

// Depth is the number of segments of a valid path; the root has depth 0.
func Depth(p string) int {
	if p == Root {
		return 0
	}
	return strings.Count(p, "/") + 1
}
