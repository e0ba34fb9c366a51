package stream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

func TestMuxDemuxRoundTrip(t *testing.T) {
	var wire bytes.Buffer
	m := NewMux(&wire, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := Stdout
			if i%2 == 1 {
				id = Stderr
			}
			for j := 0; j < 50; j++ {
				if _, err := m.Writer(id).Write([]byte(strings.Repeat("x", i+1))); err != nil {
					t.Error(err)
				}
			}
		}(i)
	}
	wg.Wait()
	var out, errOut bytes.Buffer
	if err := Demux(&wire, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 50*(1+3+5+7) || errOut.Len() != 50*(2+4+6+8) {
		t.Fatalf("stdout %d bytes, stderr %d bytes", out.Len(), errOut.Len())
	}
}

func TestMuxHeader(t *testing.T) {
	var wire bytes.Buffer
	if err := NewMux(&wire, nil).WriteFrame(Stderr, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	want := []byte{2, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'}
	if !bytes.Equal(wire.Bytes(), want) {
		t.Fatalf("frame % x, want % x", wire.Bytes(), want)
	}
}

func TestDemuxErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		bad  bool
		msg  string
	}{
		{name: "empty is clean", in: nil},
		{name: "short header", in: []byte{1, 0, 0}, bad: true},
		{name: "unknown stream", in: []byte{9, 0, 0, 0, 0, 0, 0, 1, 'x'}, bad: true},
		{name: "nonzero padding", in: []byte{1, 1, 0, 0, 0, 0, 0, 1, 'x'}, bad: true},
		{name: "short payload", in: []byte{1, 0, 0, 0, 0, 0, 0, 5, 'x'}, bad: true},
		{name: "huge frame", in: []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, bad: true},
		{name: "system frame", in: []byte{3, 0, 0, 0, 0, 0, 0, 4, 'o', 'o', 'p', 's'}, msg: "server: oops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Demux(bytes.NewReader(tt.in), io.Discard, io.Discard)
			switch {
			case tt.bad:
				if !errors.Is(err, ErrBadFrame) {
					t.Fatalf("err = %v, want ErrBadFrame", err)
				}
			case tt.msg != "":
				if err == nil || err.Error() != tt.msg {
					t.Fatalf("err = %v, want %q", err, tt.msg)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func FuzzDemux(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 2, 'h', 'i', 2, 0, 0, 0, 0, 0, 0, 1, 'e'})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 1, 'x'})
	f.Add([]byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var out, errOut bytes.Buffer
		err := Demux(bytes.NewReader(data), &out, &errOut)
		if out.Len()+errOut.Len() > len(data) {
			t.Fatalf("demux produced more payload than input")
		}
		if err == nil && (len(data)-out.Len()-errOut.Len())%HeaderLen != 0 {
			// A clean stream is whole frames: headers plus payload.
			t.Fatalf("clean demux left %d non-header bytes unaccounted", (len(data)-out.Len()-errOut.Len())%HeaderLen)
		}
	})
}
