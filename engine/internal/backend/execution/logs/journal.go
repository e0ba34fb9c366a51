package logs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The journald log driver: conmon (-l journald) sends each line of the
// container's output to the systemd journal as one entry, with MESSAGE (the
// line, its newline included), PRIORITY 6 for stdout and 3 for stderr,
// CONTAINER_ID_FULL, CONTAINER_ID, CONTAINER_NAME, SYSLOG_IDENTIFIER (the
// tag, else the name), CONTAINER_TAG (with a tag) and
// CONTAINER_PARTIAL_MESSAGE=true for a piece of a longer line. The engine
// is built without cgo, so it cannot link libsystemd's sd-journal reader:
// it reads the entries back with journalctl's JSON output instead
// (journalctl -o json CONTAINER_ID_FULL=ID), which is the same reader.

// Journal reads a container's journald log through journalctl.
type Journal struct {
	// Journalctl is the journalctl binary ("" finds it in PATH).
	Journalctl string
	// Sync asks journald to store what it has received before a follower
	// drains the container's last entries; nil runs "journalctl --sync".
	Sync func(ctx context.Context) error
}

// journalEntry is the part of one journalctl JSON record the engine reads.
type journalEntry struct {
	Cursor   string          `json:"__CURSOR"`
	Realtime string          `json:"__REALTIME_TIMESTAMP"`
	Message  json.RawMessage `json:"MESSAGE"`
	Priority string          `json:"PRIORITY"`
	Partial  string          `json:"CONTAINER_PARTIAL_MESSAGE"`
}

// line turns an entry into a log line; ok is false for an entry that is
// not one (no message or timestamp).
func (e *journalEntry) line() (Line, bool) {
	usec, err := strconv.ParseInt(e.Realtime, 10, 64)
	if err != nil {
		return Line{}, false
	}
	var text []byte
	// journalctl writes a field as a JSON string when it is printable
	// UTF-8, as an array of byte values otherwise, and as null when it is
	// too large for its output (not with --all, which Read passes).
	switch {
	case len(e.Message) > 0 && e.Message[0] == '"':
		var s string
		if json.Unmarshal(e.Message, &s) != nil {
			return Line{}, false
		}
		text = []byte(s)
	case len(e.Message) > 0 && e.Message[0] == '[':
		var b []int
		if json.Unmarshal(e.Message, &b) != nil {
			return Line{}, false
		}
		text = make([]byte, len(b))
		for i, v := range b {
			text[i] = byte(v)
		}
	default:
		return Line{}, false
	}
	l := Line{Time: time.UnixMicro(usec), Stream: Stdout, Partial: e.Partial == "true"}
	if e.Priority == "3" {
		l.Stream = Stderr
	}
	l.Text = bytes.TrimSuffix(text, []byte{'\n'})
	return l, true
}

// Read delivers the journal entries of container id to emit, oldest first,
// with the same options and meaning as the k8s-file Read: Since, Until and
// Tail select, Follow keeps reading until Done is closed (then what journald
// received before is drained) or the context ends.
func (j Journal) Read(ctx context.Context, id string, opts Options, emit func(Line) error) error {
	match := "CONTAINER_ID_FULL=" + id
	var tail *tailBuffer
	if opts.Tail >= 0 {
		tail = &tailBuffer{max: opts.Tail}
	}
	cursor := ""
	stopped := false
	deliver := func(e *journalEntry) error {
		l, ok := e.line()
		if !ok {
			cursor = e.Cursor
			return nil
		}
		if !opts.Until.IsZero() && l.Time.After(opts.Until) {
			stopped = true
			return errStop
		}
		cursor = e.Cursor
		if !opts.Since.IsZero() && l.Time.Before(opts.Since) {
			return nil
		}
		if tail != nil {
			tail.add(l)
			return nil
		}
		return emit(l)
	}
	// What is in the journal now.
	err := j.run(ctx, []string{match}, deliver)
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if tail != nil {
		t := tail
		tail = nil
		if err := t.flush(emit); err != nil {
			return err
		}
	}
	if !opts.Follow || stopped {
		return nil
	}
	// Then what comes, until the container's monitor is gone: a follower
	// runs until Done; what journald received before that (sync) but the
	// follower had not passed on is read after the last cursor delivered.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	followed := make(chan error, 1)
	args := []string{"--follow", "--lines=all", match}
	if cursor != "" {
		args = append([]string{"--after-cursor=" + cursor}, args...)
	}
	go func() { followed <- j.run(fctx, args, deliver) }()
	select {
	case err := <-followed:
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
		return ctx.Err()
	case <-ctx.Done():
		cancel()
		<-followed
		return ctx.Err()
	case <-opts.Done:
	}
	if err := j.sync(ctx); err != nil {
		cancel()
		<-followed
		return err
	}
	cancel()
	if err := <-followed; errors.Is(err, errStop) {
		return nil
	}
	args = []string{match}
	if cursor != "" {
		args = append([]string{"--after-cursor=" + cursor}, args...)
	}
	if err := j.run(ctx, args, deliver); err != nil && !errors.Is(err, errStop) {
		return err
	}
	return nil
}

// run runs journalctl with args in JSON output and passes every entry to
// fn, stopping at fn's first error (returned). A journalctl cut short by
// ctx is not an error.
func (j Journal) run(ctx context.Context, args []string, fn func(*journalEntry) error) error {
	bin := j.Journalctl
	if bin == "" {
		bin = "journalctl"
	}
	all := append([]string{"--output=json", "--all", "--no-pager", "--quiet"}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("reading the journal: %w", err)
	}
	ferr := decodeEntries(out, fn)
	if ferr != nil {
		// Stop journalctl; the rest of its output is not wanted.
		cmd.Process.Kill()
		io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	switch {
	case ferr != nil:
		return ferr
	case ctx.Err() != nil:
		return nil
	case werr != nil:
		return fmt.Errorf("reading the journal: %s: %v: %s", bin, werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// decodeEntries reads journalctl's JSON output: one object a line.
func decodeEntries(r io.Reader, fn func(*journalEntry) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxPending+(1<<20))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e journalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return sc.Err()
}

func (j Journal) sync(ctx context.Context) error {
	if j.Sync != nil {
		return j.Sync(ctx)
	}
	bin := j.Journalctl
	if bin == "" {
		bin = "journalctl"
	}
	if out, err := exec.CommandContext(ctx, bin, "--sync").CombinedOutput(); err != nil {
		return fmt.Errorf("journalctl --sync: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
