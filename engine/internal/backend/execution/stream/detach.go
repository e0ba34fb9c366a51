package stream

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// DefaultDetachKeys is the sequence Podman uses when none is given.
const DefaultDetachKeys = "ctrl-p,ctrl-q"

// ErrDetach is returned by CopyDetachable when the client typed the detach
// sequence.
var ErrDetach = errors.New("detached from container")

// ErrBadDetachKeys is wrapped by ParseDetachKeys for an invalid sequence.
var ErrBadDetachKeys = errors.New("invalid detach keys")

// ParseDetachKeys turns a comma-separated key list ("ctrl-p,ctrl-q", "a",
// "ctrl-@") into bytes. An empty string means no detach sequence.
func ParseDetachKeys(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	var out []byte
	for _, key := range strings.Split(s, ",") {
		switch {
		case len(key) == 1:
			out = append(out, key[0])
		case strings.HasPrefix(key, "ctrl-") && len(key) == len("ctrl-")+1:
			c := key[len("ctrl-")]
			switch {
			case c >= 'a' && c <= 'z':
				out = append(out, c-'a'+1)
			case c == '@':
				out = append(out, 0)
			case c >= '[' && c <= '_':
				// ctrl-[ ctrl-\ ctrl-] ctrl-^ ctrl-_
				out = append(out, c-'['+27)
			default:
				return nil, fmt.Errorf("%w: %q", ErrBadDetachKeys, key)
			}
		default:
			return nil, fmt.Errorf("%w: %q", ErrBadDetachKeys, key)
		}
	}
	return out, nil
}

// CopyDetachable copies src to dst until EOF or until src delivers the
// keys sequence, which is then swallowed and ErrDetach returned. Bytes that
// only started to look like the sequence are passed on once they diverge.
func CopyDetachable(dst io.Writer, src io.Reader, keys []byte) (int64, error) {
	buf := make([]byte, 32<<10)
	var written int64
	matched := 0
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			out := make([]byte, 0, n+matched)
			for _, b := range buf[:n] {
				if len(keys) > 0 && b == keys[matched] {
					matched++
					if matched == len(keys) {
						if len(out) > 0 {
							w, err := dst.Write(out)
							written += int64(w)
							if err != nil {
								return written, err
							}
						}
						return written, ErrDetach
					}
					continue
				}
				if matched > 0 {
					out = append(out, keys[:matched]...)
					matched = 0
					if len(keys) > 0 && b == keys[0] {
						matched = 1
						continue
					}
				}
				out = append(out, b)
			}
			if len(out) > 0 {
				w, err := dst.Write(out)
				written += int64(w)
				if err != nil {
					return written, err
				}
			}
		}
		if rerr != nil {
			if matched > 0 {
				// The sequence never completed: what was held back is data.
				w, err := dst.Write(keys[:matched])
				written += int64(w)
				if err != nil {
					return written, err
				}
			}
			if errors.Is(rerr, io.EOF) {
				return written, nil
			}
			return written, rerr
		}
	}
}
