package top

import (
	"reflect"
	"testing"
)

// TestParseHostPS: the container's lines are kept, a thread line (PID "-")
// with the process before it, an overhanging command joined into the last
// column; a table without PID is refused.
func TestParseHostPS(t *testing.T) {
	out := "UID PID PPID CMD\nroot 1 0 /sbin/init splash\nroot 42 1 sleep 100\n- - - thread-of-42\nroot 43 1 other\n- - - thread-of-43\n"
	res, err := parseHostPS([]byte(out), []int{42})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"root", "42", "1", "sleep 100"}, {"-", "-", "-", "thread-of-42"}}
	if !reflect.DeepEqual(res.Titles, []string{"UID", "PID", "PPID", "CMD"}) || !reflect.DeepEqual(res.Processes, want) {
		t.Fatalf("parsed %q %q", res.Titles, res.Processes)
	}
	if _, err := parseHostPS([]byte("UID CMD\nroot x\n"), []int{1}); err != ErrNoPIDColumn {
		t.Fatalf("no PID column: %v", err)
	}
	if CheckHostPSArgs("-o pid=PID,comm") != nil || CheckHostPSArgs("-o user=PID") == nil {
		t.Fatal("renamed PID columns")
	}
}
