package logs

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Line
		wantErr bool
	}{
		{
			name: "full stdout line",
			in:   "2023-01-02T03:04:05.123456789+00:00 stdout F hello world",
			want: Line{Time: time.Date(2023, 1, 2, 3, 4, 5, 123456789, time.UTC), Stream: Stdout, Text: []byte("hello world")},
		},
		{
			name: "partial stderr line keeps spaces",
			in:   "2023-01-02T03:04:05Z stderr P  two  spaces ",
			want: Line{Time: time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC), Stream: Stderr, Partial: true, Text: []byte(" two  spaces ")},
		},
		{
			name: "empty line",
			in:   "2023-01-02T03:04:05Z stdout F ",
			want: Line{Time: time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC), Stream: Stdout, Text: []byte{}},
		},
		{
			name: "empty line without final space",
			in:   "2023-01-02T03:04:05Z stdout F",
			want: Line{Time: time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC), Stream: Stdout},
		},
		{
			name: "local offset",
			in:   "2023-01-02T05:04:05.5+02:00 stdout F x",
			want: Line{Time: time.Date(2023, 1, 2, 3, 4, 5, 5e8, time.UTC), Stream: Stdout, Text: []byte("x")},
		},
		{name: "empty", in: "", wantErr: true},
		{name: "bad time", in: "yesterday stdout F x", wantErr: true},
		{name: "bad stream", in: "2023-01-02T03:04:05Z stdin F x", wantErr: true},
		{name: "bad tag", in: "2023-01-02T03:04:05Z stdout X x", wantErr: true},
		{name: "no tag", in: "2023-01-02T03:04:05Z stdout", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLine([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("ParseLine(%q) error = %v, want ErrMalformed", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", tt.in, err)
			}
			if !got.Time.Equal(tt.want.Time) || got.Stream != tt.want.Stream || got.Partial != tt.want.Partial || !bytes.Equal(got.Text, tt.want.Text) {
				t.Fatalf("ParseLine(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte("2023-01-02T03:04:05.123456789+00:00 stdout F hello world"))
	f.Add([]byte("2023-01-02T03:04:05Z stderr P part"))
	f.Add([]byte("2023-01-02T03:04:05Z stdout F"))
	f.Add([]byte(" stdout F "))
	f.Fuzz(func(t *testing.T, record []byte) {
		l, err := ParseLine(record)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if l.Stream != Stdout && l.Stream != Stderr {
			t.Fatalf("stream %q accepted", l.Stream)
		}
		if bytes.IndexByte(l.Text, '\n') >= 0 && bytes.IndexByte(record, '\n') < 0 {
			t.Fatalf("newline invented in text")
		}
		// A record that parsed must survive a round trip through AppendRecord.
		enc := AppendRecord(nil, l)
		again, err := ParseLine(enc[:len(enc)-1])
		if err != nil {
			t.Fatalf("re-parse of %q: %v", enc, err)
		}
		if !again.Time.Equal(l.Time) || again.Stream != l.Stream || again.Partial != l.Partial || !bytes.Equal(again.Text, l.Text) {
			t.Fatalf("round trip %+v -> %+v", l, again)
		}
	})
}
