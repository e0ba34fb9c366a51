// Package logs reads container logs written by conmon in the k8s-file format:
// one record a line, "TIMESTAMP STREAM TAG TEXT", where TAG is "F" for the
// end of a line and "P" for a partial line that the next record continues.
package logs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Stream names used in k8s-file records.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// ErrMalformed is wrapped by every parse error of a log record.
var ErrMalformed = errors.New("malformed k8s-file log record")

// Line is one record of a k8s-file log.
type Line struct {
	// Time is when conmon read the data from the container.
	Time time.Time
	// Stream is Stdout or Stderr.
	Stream string
	// Partial is true for a "P" record: the text continues in the next record
	// and no newline follows it.
	Partial bool
	// Text is the record's payload without the trailing newline.
	Text []byte
}

// ParseLine parses one record, given without its trailing newline.
// Text aliases record.
func ParseLine(record []byte) (Line, error) {
	ts, rest, ok := bytes.Cut(record, []byte{' '})
	if !ok {
		return Line{}, fmt.Errorf("%w: no stream field", ErrMalformed)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return Line{}, fmt.Errorf("%w: timestamp %q", ErrMalformed, truncate(ts))
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return Line{}, fmt.Errorf("%w: no tag field", ErrMalformed)
	}
	var line Line
	switch string(stream) {
	case Stdout:
		line.Stream = Stdout
	case Stderr:
		line.Stream = Stderr
	default:
		return Line{}, fmt.Errorf("%w: stream %q", ErrMalformed, truncate(stream))
	}
	tag, text, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// conmon writes "TS stdout F " for an empty line; tolerate a missing
		// final space too.
		tag, text = rest, nil
	}
	switch string(tag) {
	case "F":
	case "P":
		line.Partial = true
	default:
		return Line{}, fmt.Errorf("%w: tag %q", ErrMalformed, truncate(tag))
	}
	line.Time = t
	line.Text = text
	return line, nil
}

// AppendRecord appends the k8s-file encoding of l (with its newline) to dst.
// It is the inverse of ParseLine; tests and tools use it to write logs.
func AppendRecord(dst []byte, l Line) []byte {
	dst = l.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, ' ')
	dst = append(dst, l.Stream...)
	if l.Partial {
		dst = append(dst, " P "...)
	} else {
		dst = append(dst, " F "...)
	}
	dst = append(dst, l.Text...)
	return append(dst, '\n')
}

func truncate(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
