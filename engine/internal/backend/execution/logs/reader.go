package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Options select which records Read delivers.
type Options struct {
	// Since drops records older than this time (zero: no lower bound).
	Since time.Time
	// Until stops reading at the first record newer than this time
	// (zero: no upper bound).
	Until time.Time
	// Tail keeps only the last Tail complete lines (with their partial
	// records); negative means all.
	Tail int
	// Follow keeps reading as the file grows, until Done is closed (then the
	// rest of the file is drained), Until passes, or the context ends.
	Follow bool
	// Done is closed when nothing more will be written to the file (the
	// container's monitor exited). Only used with Follow; nil means never.
	Done <-chan struct{}
	// PollInterval bounds how long a follower may miss a write when file
	// notifications are lost; zero means 250ms.
	PollInterval time.Duration
}

// maxPending bounds the bytes of one record a reader keeps while waiting for
// its newline; a longer record is dropped.
const maxPending = 16 << 20

// errStop ends reading when Until has passed.
var errStop = errors.New("until reached")

// Read delivers the records of the k8s-file log at path to emit, in file
// order. Malformed records are skipped. A missing file reads as empty; when
// following, Read waits for it to appear. Text passed to emit is only valid
// during the call.
func Read(ctx context.Context, path string, opts Options, emit func(Line) error) error {
	r := &reader{path: path, opts: opts, emit: emit}
	if opts.Tail >= 0 {
		r.tail = &tailBuffer{max: opts.Tail}
		// Without an upper time bound the last lines are the answer: start
		// near the end of a long log instead of reading all of it.
		if opts.Until.IsZero() {
			if err := r.skipToTail(opts.Tail); err != nil {
				return err
			}
		}
	}
	err := r.readAvailable()
	stopped := errors.Is(err, errStop)
	if (err == nil || stopped) && r.tail != nil {
		tail := r.tail
		r.tail = nil
		if ferr := tail.flush(r.emit); ferr != nil {
			err = ferr
		}
	}
	if err == nil && opts.Follow {
		err = r.follow(ctx)
	}
	if r.file != nil {
		r.file.Close()
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

type reader struct {
	path    string
	opts    Options
	emit    func(Line) error
	tail    *tailBuffer
	file    *os.File
	offset  int64
	pending []byte
	buf     []byte
}

// deliver applies the time bounds and passes a record on.
func (r *reader) deliver(l Line) error {
	if !r.opts.Until.IsZero() && l.Time.After(r.opts.Until) {
		return errStop
	}
	if !r.opts.Since.IsZero() && l.Time.Before(r.opts.Since) {
		return nil
	}
	return r.emit(l)
}

// handle routes a parsed record through the tail buffer when one is active.
func (r *reader) handle(record []byte) error {
	l, err := ParseLine(record)
	if err != nil {
		return nil
	}
	if r.tail != nil {
		if !r.opts.Until.IsZero() && l.Time.After(r.opts.Until) {
			return errStop
		}
		if !r.opts.Since.IsZero() && l.Time.Before(r.opts.Since) {
			return nil
		}
		r.tail.add(l)
		return nil
	}
	return r.deliver(l)
}

// open opens the log file when it is not open yet; it reports false when
// the file does not exist.
func (r *reader) open() (bool, error) {
	if r.file != nil {
		return true, nil
	}
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open container log: %w", err)
	}
	r.file = f
	r.offset = 0
	r.pending = r.pending[:0]
	return true, nil
}

// maxTailScan bounds how much of the file's end skipToTail examines; a tail
// that reaches further is read from the start.
const maxTailScan = 8 << 20

// skipToTail opens the file and positions it so that at least n complete
// lines follow (it stays at the start when the file holds fewer, or when
// they are further back than maxTailScan).
func (r *reader) skipToTail(n int) error {
	ok, err := r.open()
	if err != nil || !ok {
		return err
	}
	st, err := r.file.Stat()
	if err != nil {
		return fmt.Errorf("stat container log: %w", err)
	}
	offset, err := tailOffset(r.file, st.Size(), n)
	if err != nil || offset == 0 {
		return err
	}
	if _, err := r.file.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("seek container log: %w", err)
	}
	r.offset = offset
	return nil
}

// tailOffset finds the start of the record that follows the (n+1)-th
// complete line from the end, reading backwards; 0 when there is none
// within maxTailScan.
func tailOffset(f io.ReaderAt, size int64, n int) (int64, error) {
	const chunk = 64 << 10
	pos := size
	var data []byte
	for pos > 0 && len(data) < maxTailScan {
		step := min(int64(chunk), pos)
		buf := make([]byte, step)
		if _, err := f.ReadAt(buf, pos-step); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read container log: %w", err)
		}
		pos -= step
		data = append(buf, data...)
		// Records known whole: those after the first newline of data
		// (everything, at the start of the file), newline-terminated.
		start := 0
		if pos > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				continue
			}
			start = i + 1
		}
		end := bytes.LastIndexByte(data, '\n')
		if end < start {
			continue
		}
		// Walk the whole records backwards counting complete lines.
		full := 0
		recEnd := end
		for recEnd >= start {
			recStart := bytes.LastIndexByte(data[start:recEnd], '\n')
			if recStart < 0 {
				recStart = start
			} else {
				recStart += start + 1
			}
			if l, err := ParseLine(data[recStart:recEnd]); err == nil && !l.Partial {
				full++
				if full == n+1 {
					return pos + int64(recEnd) + 1, nil
				}
			}
			recEnd = recStart - 1
		}
	}
	return 0, nil
}

// reopenIfReplaced notices truncation or replacement of the file (log
// rotation) and starts over on the new contents.
func (r *reader) reopenIfReplaced() error {
	if r.file == nil {
		return nil
	}
	cur, err := r.file.Stat()
	if err != nil {
		return fmt.Errorf("stat container log: %w", err)
	}
	onDisk, err := os.Stat(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat container log: %w", err)
	}
	if os.SameFile(cur, onDisk) && cur.Size() >= r.offset {
		return nil
	}
	if os.SameFile(cur, onDisk) {
		// Truncated in place.
		if _, err := r.file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("seek container log: %w", err)
		}
		r.offset = 0
		r.pending = r.pending[:0]
		return nil
	}
	// Replaced: finish the old file, then switch.
	if err := r.readFile(); err != nil {
		return err
	}
	r.file.Close()
	r.file = nil
	_, err = r.open()
	return err
}

// readAvailable reads every complete record now in the file.
func (r *reader) readAvailable() error {
	ok, err := r.open()
	if err != nil || !ok {
		return err
	}
	if err := r.reopenIfReplaced(); err != nil {
		return err
	}
	return r.readFile()
}

func (r *reader) readFile() error {
	if r.buf == nil {
		r.buf = make([]byte, 64<<10)
	}
	for {
		n, err := r.file.Read(r.buf)
		if n > 0 {
			r.offset += int64(n)
			if perr := r.consume(r.buf[:n]); perr != nil {
				return perr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read container log: %w", err)
		}
	}
}

// consume splits data into records, keeping an unterminated tail pending.
func (r *reader) consume(data []byte) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(r.pending)+len(data) > maxPending {
				r.pending = r.pending[:0]
				return nil
			}
			r.pending = append(r.pending, data...)
			return nil
		}
		record := data[:i]
		if len(r.pending) > 0 {
			r.pending = append(r.pending, record...)
			record = r.pending
		}
		if err := r.handle(record); err != nil {
			return err
		}
		r.pending = r.pending[:0]
		data = data[i+1:]
	}
	return nil
}

// follow waits for writes and delivers new records until told to stop.
func (r *reader) follow(ctx context.Context) error {
	// Watching the file catches writes at once; without a watcher (inotify
	// instances exhausted) or while the file is missing, polling covers.
	var events <-chan fsnotify.Event
	var errs <-chan error
	watcher, err := fsnotify.NewWatcher()
	if err == nil {
		defer watcher.Close()
		_ = watcher.Add(r.path)
		events, errs = watcher.Events, watcher.Errors
	}
	watched := watcher == nil || r.file != nil

	interval := r.opts.PollInterval
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()

	var untilC <-chan time.Time
	if !r.opts.Until.IsZero() {
		timer := time.NewTimer(time.Until(r.opts.Until))
		defer timer.Stop()
		untilC = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.opts.Done:
			return r.readAvailable()
		case <-untilC:
			return r.readAvailable()
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case _, ok := <-errs:
			if !ok {
				errs = nil
			}
		case <-ticker.C:
		}
		if err := r.readAvailable(); err != nil {
			return err
		}
		if !watched && r.file != nil {
			_ = watcher.Add(r.path)
			watched = true
		}
	}
}

// tailBuffer keeps the last max complete lines, each with the partial
// records that precede its final record.
type tailBuffer struct {
	max   int
	lines [][]Line
	open  []Line
}

func (t *tailBuffer) add(l Line) {
	l.Text = bytes.Clone(l.Text)
	t.open = append(t.open, l)
	if l.Partial {
		return
	}
	if t.max == 0 {
		t.open = nil
		return
	}
	t.lines = append(t.lines, t.open)
	t.open = nil
	if len(t.lines) > t.max {
		// Drop the oldest; compact now and then so memory stays bounded.
		t.lines[0] = nil
		t.lines = t.lines[1:]
		if cap(t.lines) > 4*t.max+64 {
			t.lines = append([][]Line(nil), t.lines...)
		}
	}
}

// flush delivers the kept lines, then any trailing partial records.
func (t *tailBuffer) flush(deliver func(Line) error) error {
	if t.max == 0 {
		return nil
	}
	for _, group := range t.lines {
		for _, l := range group {
			if err := deliver(l); err != nil {
				return err
			}
		}
	}
	for _, l := range t.open {
		if err := deliver(l); err != nil {
			return err
		}
	}
	return nil
}
