// Package syncbuf is a byte buffer that goroutines may write and read at
// once: the log sink a test hands to a server, an engine or a process while
// it reads what was written so far.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer behind a mutex. The zero value is empty and
// ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines are the non-empty lines written so far.
func (b *Buffer) Lines() []string {
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// LastLine is the last line that contains s, or "" when none does.
func (b *Buffer) LastLine(s string) string {
	lines := b.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[i]
		}
	}
	return ""
}
