package sizelimit

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// zstdBomb is a small zstd stream of n zero bytes.
func zstdBomb(t testing.TB, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(enc, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipOf(t testing.TB, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.CopyN(zw, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestDecompressStopsAtTheBound(t *testing.T) {
	testdeadline.Set(t, 30*time.Second)
	bomb := zstdBomb(t, 256<<20)
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb is %d bytes, want a small one", len(bomb))
	}
	b := New(4<<20, "archive")
	rc, err := b.Decompress(context.Background(), bytes.NewReader(bomb))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	var exceeded *ExceededError
	if !errors.As(err, &exceeded) || !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("copy: %v, want an ExceededError that is core.ErrTooLarge", err)
	}
	if n > 4<<20 {
		t.Fatalf("copied %d bytes past a bound of %d", n, 4<<20)
	}
	if !strings.Contains(err.Error(), "archive") || !strings.Contains(err.Error(), "4 MiB") {
		t.Fatalf("error %q should name the content and the bound", err)
	}
}

func TestWithinTheBoundCopiesEverything(t *testing.T) {
	testdeadline.Set(t, 30*time.Second)
	b := New(1<<20, "archive")
	var out bytes.Buffer
	n, err := b.Copy(context.Background(), &out, bytes.NewReader(make([]byte, 1<<20)))
	if err != nil || n != 1<<20 {
		t.Fatalf("copy of exactly the bound: %d, %v", n, err)
	}
	if _, err := b.Copy(context.Background(), io.Discard, strings.NewReader("x")); !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("one byte more: %v, want ErrTooLarge", err)
	}
}

func TestReaderStopsWhenTheContextEnds(t *testing.T) {
	testdeadline.Set(t, 30*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	r := New(1<<40, "archive").Reader(ctx, zeros{})
	buf := make([]byte, 4096)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := r.Read(buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
}

func TestMeasureTarChargesLayersDecompressed(t *testing.T) {
	testdeadline.Set(t, 30*time.Second)
	archive := tartest.Files(t, map[string]string{
		"manifest.json": `[]`,
		"layer1.tar.gz": string(gzipOf(t, 3<<20)),
		"layer2.tar.gz": string(gzipOf(t, 3<<20)),
	})
	if err := New(8<<20, "image layers").MeasureTar(context.Background(), bytes.NewReader(archive)); err != nil {
		t.Fatalf("6 MiB of layers within 8 MiB: %v", err)
	}
	err := New(5<<20, "image layers").MeasureTar(context.Background(), bytes.NewReader(archive))
	if !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("6 MiB of layers within 5 MiB: %v, want ErrTooLarge", err)
	}
	err = New(8<<20, "image layers").MeasureTar(context.Background(), strings.NewReader("not a tar archive, not at all, no"))
	if !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("garbage: %v, want ErrInvalidArgument", err)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "1048576", want: 1 << 20},
		{in: "16G", want: 16 << 30},
		{in: "16GiB", want: 16 << 30},
		{in: "16 GiB", want: 16 << 30},
		{in: "512mb", want: 512 << 20},
		{in: "2k", want: 2048},
		{in: "1T", want: 1 << 40},
		{in: "0", bad: true},
		{in: "-1", bad: true},
		{in: "", bad: true},
		{in: "G", bad: true},
		{in: "1.5G", bad: true},
		{in: "99999999999T", bad: true},
	} {
		got, err := ParseSize(tc.in)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, bad=%v", tc.in, got, err, tc.want, tc.bad)
		}
	}
	if got, err := ParseSize(FormatSize(DefaultMax)); err != nil || got != DefaultMax {
		t.Errorf("the default does not round-trip: %d, %v", got, err)
	}
}

// FuzzMeasureTar: any archive a client sends is measured without a panic,
// and a measured archive never charges more than the bound without saying so.
func FuzzMeasureTar(f *testing.F) {
	f.Add(tartest.Of(f, "a", "hello"))
	f.Add(tartest.Of(f, "layer.tar.gz", string(gzipOf(f, 1<<16))))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := New(1<<20, "archive")
		err := b.MeasureTar(context.Background(), bytes.NewReader(data))
		if err == nil && b.Used() > b.Max() {
			t.Fatalf("charged %d over a bound of %d without an error", b.Used(), b.Max())
		}
	})
}

// TestBombsAreRefusedByRatio: under the default 16 GiB bound, a zstd stream
// of zeros is refused once it has expanded past RatioFloor at more than
// MaxRatio times its compressed size (before: only at the bound, 7 s for a
// 135 KB body), by Decompress and MeasureStream alike; gzip, which cannot
// pass about 1,032:1, is never refused by the ratio.
func TestBombsAreRefusedByRatio(t *testing.T) {
	testdeadline.Set(t, 60*time.Second)
	bomb := zstdBomb(t, 1<<30)
	b := New(0, "archive")
	rc, err := b.Decompress(context.Background(), bytes.NewReader(bomb))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	var ratio *RatioError
	if !errors.As(err, &ratio) || !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("decompress: %v after %d bytes, want a RatioError that is core.ErrTooLarge", err, n)
	}
	if n > 2*RatioFloor {
		t.Fatalf("%d bytes came out before the refusal, want about %d", n, RatioFloor)
	}
	if !strings.Contains(err.Error(), "archive") || !strings.Contains(err.Error(), "decompression bomb") {
		t.Fatalf("error %q should name the content and say why", err)
	}
	if err := New(0, "layers").MeasureStream(context.Background(), bytes.NewReader(bomb), int64(len(bomb))); !errors.As(err, &ratio) {
		t.Fatalf("measure: %v, want a RatioError", err)
	}

	plain := gzipOf(t, 2*RatioFloor)
	rc, err = New(0, "archive").Decompress(context.Background(), bytes.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if n, err := io.Copy(io.Discard, rc); err != nil || n != 2*RatioFloor {
		t.Fatalf("gzip of %d zeros: %d bytes, %v", 2*RatioFloor, n, err)
	}
}
