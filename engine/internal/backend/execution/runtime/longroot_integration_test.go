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
	long := filepath.Join(t.TempDir(), strings.Repeat("r", 60), strings.Repeat("u", 60))
	attachRoundTrip(t, long)
}

// TestAttachWhereTheSocketLinkIs107Bytes: a run root whose socket
// directory's entry for a container ID is 107 bytes long, where conmon
// without --full-attach named its link one byte short and attach found no
// directory (TestPodSysctl failed so when t.TempDir gave a 9-digit name).
func TestAttachWhereTheSocketLinkIs107Bytes(t *testing.T) {
	requireTools(t)
	base, err := os.MkdirTemp("", "b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// RUNROOT/socket/ID: 107 bytes with a 64-byte ID.
	want := 107 - len("/socket/") - 64
	if len(base)+2 > want {
		t.Skipf("the temporary directory %s is too long to build a run root of %d bytes", base, want)
	}
	runRoot := filepath.Join(base, strings.Repeat("x", want-len(base)-1))
	if err := os.MkdirAll(runRoot, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := len(filepath.Join(runRoot, "socket", strings.Repeat("a", 64))); n != 107 {
		t.Fatalf("the socket link would be %d bytes, want 107", n)
	}
	attachRoundTrip(t, runRoot)
}

// attachRoundTrip creates a container under runRoot that echoes a line of
// its stdin, attaches before it starts, writes the line and reads it back.
func attachRoundTrip(t *testing.T, runRoot string) {
	t.Helper()
	r, err := New(Options{RunRoot: runRoot})
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
	conn, err := stream.DialAttach(r.AttachSocket(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustStart(t, r, id)
	conn.Write([]byte("hello\n"))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out strings.Builder
	stream.CopyFromConmon(conn, stream.Output{Stdout: &out})
	if out.String() != "got hello\n" {
		t.Fatalf("attach output %q", out.String())
	}
	waitExit(t, r, id)
}
