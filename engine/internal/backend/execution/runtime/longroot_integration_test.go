package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
)

// TestAttachUnderALongRunRoot: conmon's attach socket lies more than 108
// bytes deep (the limit of a unix socket address); conmon binds it and the
// engine dials it through /proc/self/fd, so attach still works.
func TestAttachUnderALongRunRoot(t *testing.T) {
	requireTools(t)
	root := t.TempDir()
	long := filepath.Join(root, strings.Repeat("r", 60), strings.Repeat("u", 60))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{RunRoot: long})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := strings.Repeat("a", 64)
	dir := bundle(t, id, false, "sh", "-c", "read line; echo got $line")
	defer r.Delete(ctx, id, true)
	if _, err := r.Create(ctx, CreateOptions{ID: id, Name: "t", Bundle: dir, LogPath: filepath.Join(dir, "ctr.log"), Stdin: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(r.AttachSocket(id)); n <= 108 {
		t.Fatalf("the attach socket path is only %d bytes", n)
	}
	conn, err := stream.DialAttach(r.AttachSocket(id))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := r.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("hello\n"))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out strings.Builder
	stream.CopyFromConmon(conn, stream.Output{Stdout: &out})
	if out.String() != "got hello\n" {
		t.Fatalf("attach output %q", out.String())
	}
	waitExit(t, r, id)
}
