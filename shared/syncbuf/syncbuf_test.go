package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWritesAndLines(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := len(b.Lines()); n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
	for _, line := range b.Lines() {
		if !strings.HasPrefix(line, "writer ") || !strings.Contains(line, " line ") {
			t.Fatalf("interleaved line %q", line)
		}
	}
}

func TestLastLine(t *testing.T) {
	var b Buffer
	b.Write([]byte("build started\nbuild finished in 1s\n\nbuild finished in 2s\nother\n"))
	if got := b.LastLine("build finished"); got != "build finished in 2s" {
		t.Fatalf("LastLine = %q", got)
	}
	if got := b.LastLine("absent"); got != "" {
		t.Fatalf("LastLine of an absent text = %q", got)
	}
}
