package logs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeJournalctl writes a journalctl stand-in (this package's unit tests
// only: the host suite reads a real journal) that prints now.json, or with
// --follow follow.json and then waits, or with --after-cursor (and no
// --follow) drain.json, and records its arguments in calls.
func fakeJournalctl(t *testing.T, now, follow, drain string) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	for name, content := range map[string]string{"now.json": now, "follow.json": follow, "drain.json": drain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin = filepath.Join(dir, "journalctl")
	script := `#!/bin/sh
d=` + dir + `
echo "$*" >>$d/calls
case " $* " in
*" --sync "*) exit 0 ;;
*" --follow "*) cat $d/follow.json; exec sleep 30 ;;
*--after-cursor*) cat $d/drain.json ;;
*) cat $d/now.json ;;
esac
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

// entry is one journalctl -o json record as conmon's fields make it.
func entry(cursor string, usec int64, prio, msg string, partial bool) string {
	p := ""
	if partial {
		p = `,"CONTAINER_PARTIAL_MESSAGE":"true"`
	}
	return fmt.Sprintf(`{"__CURSOR":%q,"__REALTIME_TIMESTAMP":"%d","PRIORITY":%q,"MESSAGE":%s,"CONTAINER_ID_FULL":"abc","SYSLOG_IDENTIFIER":"web"%s}`+"\n", cursor, usec, prio, msg, p)
}

func collectJournal(t *testing.T, j Journal, opts Options) (string, []string) {
	t.Helper()
	var out strings.Builder
	var streams []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := j.Read(ctx, "abc", opts, func(l Line) error {
		out.Write(l.Text)
		if !l.Partial {
			out.WriteByte('|')
		}
		streams = append(streams, l.Stream)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), streams
}

// TestJournalRead: entries become lines (stderr by priority, partial
// pieces joined, a byte-array MESSAGE decoded); since, until and tail
// select; follow reads on until the container is done, then drains what
// journald had after the last cursor.
func TestJournalRead(t *testing.T) {
	base := int64(1_700_000_000_000_000)
	now := entry("c1", base, "6", `"one\n"`, false) +
		entry("c2", base+1000, "3", `"two\n"`, false) +
		entry("c3", base+2000, "6", `"thr"`, true) +
		entry("c4", base+2001, "6", `"ee\n"`, false) +
		entry("c5", base+3000, "6", `[102,111,117,114,255,10]`, false) +
		`{"__CURSOR":"c6","__REALTIME_TIMESTAMP":"1","MESSAGE":null}` + "\n"
	bin, dir := fakeJournalctl(t, now, entry("c7", base+4000, "6", `"five\n"`, false), entry("c8", base+5000, "3", `"six\n"`, false))
	j := Journal{Journalctl: bin}
	text, streams := collectJournal(t, j, Options{Tail: -1})
	if text != "one|two|three|four\xff|" || strings.Join(streams, ",") != "stdout,stderr,stdout,stdout,stdout" {
		t.Fatalf("all: %q %v", text, streams)
	}
	if text, _ := collectJournal(t, j, Options{Tail: 2}); text != "three|four\xff|" {
		t.Fatalf("tail 2: %q", text)
	}
	if text, _ := collectJournal(t, j, Options{Tail: 0}); text != "" {
		t.Fatalf("tail 0: %q", text)
	}
	at := func(usec int64) time.Time { return time.UnixMicro(usec) }
	if text, _ := collectJournal(t, j, Options{Tail: -1, Since: at(base + 1000), Until: at(base + 2500)}); text != "two|three|" {
		t.Fatalf("since/until: %q", text)
	}
	done := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(done) })
	text, _ = collectJournal(t, j, Options{Tail: 1, Follow: true, Done: done})
	if text != "four\xff|five|six|" {
		t.Fatalf("follow: %q", text)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	for _, want := range []string{
		"--output=json --all --no-pager --quiet CONTAINER_ID_FULL=abc",
		"--after-cursor=c6 --follow --lines=all CONTAINER_ID_FULL=abc",
		"--sync",
		"--after-cursor=c7 CONTAINER_ID_FULL=abc",
	} {
		if !strings.Contains(string(calls), want) {
			t.Errorf("journalctl was not called with %q:\n%s", want, calls)
		}
	}
}

// TestJournalReadFails: a journalctl that fails is an error naming it.
func TestJournalReadFails(t *testing.T) {
	j := Journal{Journalctl: filepath.Join(t.TempDir(), "missing")}
	err := j.Read(context.Background(), "abc", Options{Tail: -1}, func(Line) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "reading the journal") {
		t.Fatalf("err %v", err)
	}
}
