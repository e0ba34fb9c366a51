package containers_test

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

type zeroBytes struct{}

func (zeroBytes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestPutArchiveBombIs413: a zstd archive of a few hundred kilobytes that
// expands to 17 GiB, PUT into a container, is refused with 413 within 5 s
// under the default bound (before: it was decompressed into the engine's
// tmp directory without any bound), and the container is unchanged.
func TestPutArchiveBombIs413(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"image": "busybox", "command": []string{"true"}, "netns": map[string]any{"nsmode": "none"}})
	// One tar entry of 17 GiB of zeros (zeros alone would read as the
	// archive's end): a frame with the header, then 272 frames of 64 MiB of
	// zeros (concatenated frames decode as one stream).
	compress := func(r io.Reader) []byte {
		var frame bytes.Buffer
		enc, err := zstd.NewWriter(&frame, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(enc, r); err != nil {
			t.Fatal(err)
		}
		enc.Close()
		return frame.Bytes()
	}
	var header bytes.Buffer
	tw := tar.NewWriter(&header)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Mode: 0o644, Size: 272 << 26, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	bomb := append(compress(&header), bytes.Repeat(compress(io.LimitReader(zeroBytes{}, 64<<20)), 272)...)
	start := time.Now()
	status, body := te.putArchive(id, "/tmp", bomb, "")
	took := time.Since(start)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "decompression bomb") {
		t.Fatalf("bomb: %d %s, want 413 naming the decompression bomb", status, body)
	}
	if took > 5*time.Second {
		t.Fatalf("a %d-byte bomb was refused after %v, want within 5s", len(bomb), took)
	}
	t.Logf("%d-byte archive expanding to 17 GiB refused in %v", len(bomb), took.Round(time.Millisecond))
}
