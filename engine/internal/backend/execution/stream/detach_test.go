package stream

import (
	"bytes"
	"errors"
	"testing"
	"testing/iotest"
)

func TestParseDetachKeys(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
		bad  bool
	}{
		{in: "", want: nil},
		{in: "ctrl-p,ctrl-q", want: []byte{16, 17}},
		{in: "a,b", want: []byte{'a', 'b'}},
		{in: "ctrl-@,ctrl-[,ctrl-_", want: []byte{0, 27, 31}},
		{in: "ctrl-", bad: true},
		{in: "ctrl-pq", bad: true},
		{in: "ab", bad: true},
		{in: "ctrl-1", bad: true},
		{in: "a,,b", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseDetachKeys(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrBadDetachKeys) {
				t.Errorf("ParseDetachKeys(%q) err = %v, want ErrBadDetachKeys", tt.in, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, tt.want) {
			t.Errorf("ParseDetachKeys(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestCopyDetachable(t *testing.T) {
	keys := []byte{16, 17}
	tests := []struct {
		name   string
		in     string
		want   string
		detach bool
	}{
		{name: "plain", in: "hello", want: "hello"},
		{name: "detach", in: "ab\x10\x11cd", want: "ab", detach: true},
		{name: "false start", in: "a\x10b\x10\x11", want: "a\x10b", detach: true},
		{name: "prefix at end", in: "a\x10", want: "a\x10"},
		{name: "repeated first key", in: "\x10\x10\x11", want: "\x10", detach: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			// One byte a read exercises matches split across reads.
			_, err := CopyDetachable(&out, iotest.OneByteReader(bytes.NewReader([]byte(tt.in))), keys)
			if tt.detach != errors.Is(err, ErrDetach) {
				t.Fatalf("err = %v, detach want %v", err, tt.detach)
			}
			if !tt.detach && err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("copied %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func FuzzParseDetachKeys(f *testing.F) {
	f.Add("ctrl-p,ctrl-q")
	f.Add("a,ctrl-@")
	f.Add("ctrl-,")
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseDetachKeys(s)
		if err != nil {
			if !errors.Is(err, ErrBadDetachKeys) {
				t.Fatalf("unexpected error type %v", err)
			}
			return
		}
		if s != "" && len(keys) == 0 {
			t.Fatalf("%q parsed to no keys", s)
		}
		// Input that never contains the sequence passes through unchanged.
		var out bytes.Buffer
		in := bytes.Repeat([]byte{'z'}, 10)
		if len(keys) > 0 && bytes.Contains(in, keys) {
			return
		}
		if _, err := CopyDetachable(&out, bytes.NewReader(in), keys); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("keys %v changed %q into %q", keys, in, out.Bytes())
		}
	})
}
