package exec

import (
	"bytes"
	"sync"
)

// CappedOutput keeps the first Limit bytes a process run in a container
// writes (a healthcheck's output, ps(1)'s listing): what comes later is
// dropped and the writes still succeed, so the process is never cut short.
// Its stdout and stderr may write at once.
type CappedOutput struct {
	Limit int
	mu    sync.Mutex
	buf   bytes.Buffer
}

// Write keeps what fits under Limit of p.
func (b *CappedOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.Limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// String is what was kept.
func (b *CappedOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
