package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/internal/files"
)

// A temporary left by a crashed write is removed while the service runs, not only at the
// next start; a fresh one (a write in progress) stays.
func TestSweepTempWhileRunning(t *testing.T) {
	dataDir := t.TempDir()
	tree, err := files.New(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	const id = "0b6a3f8e-5f2c-4c7e-9a51-1d2f3e4a5b6c"
	if err := tree.Create(id); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepTempEvery(ctx, tree, slog.New(slog.NewTextHandler(io.Discard, nil)), 20*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()

	time.Sleep(50 * time.Millisecond) // the first sweep has run: these come later
	tmp := filepath.Join(dataDir, "uploads", id, "tmp")
	stale, fresh := filepath.Join(tmp, "put-stale"), filepath.Join(tmp, "put-fresh")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, err := os.Stat(stale); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stale temporary still there while the service runs")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh temporary removed: %v", err)
	}
}
