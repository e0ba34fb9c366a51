package exec

import (
	"strings"
	"sync"
	"testing"
)

// TestCappedOutput: concurrent writers all succeed in full, and only the
// first Limit bytes are kept.
func TestCappedOutput(t *testing.T) {
	b := CappedOutput{Limit: 25}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				if n, err := b.Write([]byte("0123456789")); n != 10 || err != nil {
					t.Errorf("write: %d, %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
	if got := b.String(); len(got) != 25 || strings.Trim(got, "0123456789") != "" {
		t.Fatalf("kept %q, want 25 bytes of the writes", got)
	}
}
