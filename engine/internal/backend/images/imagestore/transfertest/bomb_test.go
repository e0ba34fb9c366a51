package transfertest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/testimage"
)

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// zstdZeros is a zstd stream of frames*64 MiB zero bytes: one small frame
// repeated (concatenated frames decode as one stream), so a multi-gigabyte
// bomb costs the test nothing to build.
func zstdZeros(t testing.TB, frames int) []byte {
	t.Helper()
	var frame bytes.Buffer
	enc, err := zstd.NewWriter(&frame, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(enc, zeroReader{}, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(frame.Bytes(), frames)
}

// gzipLayers rewrites a docker-archive with every layer.tar gzip-compressed,
// as docker-archives from some tools carry them.
func gzipLayers(t testing.TB, archive []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(hdr.Name, "layer.tar") {
			var z bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
			if _, err := zw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			data = z.Bytes()
			hdr.Size = int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// transferTemporaries lists what transfers left in the store's tmp directory.
func (e *env) transferTemporaries(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(e.store.SystemContext().BigFilesTemporaryDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

// TestLoadAndImportBombsAre413: a zstd body of a few kilobytes that expands
// to 256 MiB is refused with 413 once it passes the bound (8 MiB here), by
// load and import alike, quickly and without leaving temporaries.
func TestLoadAndImportBombsAre413(t *testing.T) {
	e := newEnvWith(t, imagestore.TransferOptions{MaxExpandedSize: 8 << 20})
	srv := e.server(t)
	bomb := zstdZeros(t, 4)
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	for _, path := range []string{"/v4.3.1/libpod/images/load", "/v4.3.1/libpod/images/import?reference=bomb"} {
		start := time.Now()
		status, body := call(t, http.MethodPost, srv.URL+path, bytes.NewReader(bomb), nil)
		msg := expectError(t, path, status, body, http.StatusRequestEntityTooLarge)
		if !strings.Contains(msg.Message, "max-expanded-size") {
			t.Errorf("%s: message %q does not name the limit's flag", path, msg.Message)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: took %v", path, d)
		}
		if left := e.transferTemporaries(t); len(left) > 0 {
			t.Errorf("%s: temporaries left: %v", path, left)
		}
	}
}

// TestLoadLayerBombIs413: an archive whose gzip layer expands past the bound
// is refused before any layer is stored; with a larger bound the same
// archive loads (gzip layers are measured, not refused).
func TestLoadLayerBombIs413(t *testing.T) {
	zeros := testimage.File{Path: "zeros.bin", Mode: 0o644, Size: 24 << 20, Content: func() io.Reader { return io.LimitReader(zeroReader{}, 24<<20) }}
	img := withLayer(testimage.Busybox("localhost/bomb:1", "true"), testimage.Layer{Files: []testimage.File{zeros}})
	data := gzipLayers(t, archive(t, testimage.Docker, img))
	if len(data) > 4<<20 {
		t.Fatalf("archive is %d bytes, want a small one", len(data))
	}

	e := newEnvWith(t, imagestore.TransferOptions{MaxExpandedSize: 16 << 20})
	srv := e.server(t)
	before := e.snapshot(t)
	status, body := call(t, http.MethodPost, srv.URL+"/v4.3.1/libpod/images/load", bytes.NewReader(data), nil)
	msg := expectError(t, "layer bomb", status, body, http.StatusRequestEntityTooLarge)
	if !strings.Contains(msg.Message, "image layers") {
		t.Errorf("message %q does not say the layers are too large", msg.Message)
	}
	if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
		t.Errorf("store changed:\nbefore %s\nafter  %s", before, after)
	}
	if left := e.transferTemporaries(t); len(left) > 0 {
		t.Errorf("temporaries left: %v", left)
	}

	roomy := newEnvWith(t, imagestore.TransferOptions{MaxExpandedSize: 64 << 20})
	if names, err := roomy.transfer.Load(context.Background(), bytes.NewReader(data), core.LoadOptions{}); err != nil || len(names) != 1 {
		t.Fatalf("load within the bound: %v, %v", names, err)
	}
}

// TestLoadStopsWhenTheClientGoes: a client that goes away while its archive
// is being decompressed stops the work at once and its temporaries are gone
// within a second, not after the whole bomb was spooled.
func TestLoadStopsWhenTheClientGoes(t *testing.T) {
	e := newEnvWith(t, imagestore.TransferOptions{MaxExpandedSize: 64 << 30})
	srv := e.server(t)
	bomb := zstdZeros(t, 64) // 4 GiB decompressed
	tmp := e.store.SystemContext().BigFilesTemporaryDir

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v4.3.1/libpod/images/load", bytes.NewReader(bomb))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !decompressing(tmp) {
		if time.Now().After(deadline) {
			t.Fatal("the load never started decompressing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	gone := time.Now().Add(2 * time.Second)
	for {
		left := e.transferTemporaries(t)
		if len(left) == 0 {
			break
		}
		if time.Now().After(gone) {
			t.Fatalf("2s after the client went, temporaries remain: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func decompressing(tmp string) bool {
	matches, _ := filepath.Glob(filepath.Join(tmp, "transfer-load-decompressed-*"))
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.Size() > 0 {
			return true
		}
	}
	return false
}

// TestBombRefusedWithinFiveSeconds: under the default bound (16 GiB), a
// zstd body of a few hundred kilobytes that expands to 17 GiB is refused
// with 413 within 5 s of its first byte, by load and import alike, and
// leaves no temporaries. Before, only the bound stopped it: 7.0 s, after
// 16 GiB were spooled to the store's tmp directory.
func TestBombRefusedWithinFiveSeconds(t *testing.T) {
	e := newEnvWith(t, imagestore.TransferOptions{})
	srv := e.server(t)
	bomb := zstdZeros(t, 272) // 17 GiB
	for _, path := range []string{"/v4.3.1/libpod/images/load", "/v4.3.1/libpod/images/import?reference=bomb"} {
		start := time.Now()
		status, body := call(t, http.MethodPost, srv.URL+path, bytes.NewReader(bomb), nil)
		took := time.Since(start)
		msg := expectError(t, path, status, body, http.StatusRequestEntityTooLarge)
		if !strings.Contains(msg.Message, "decompression bomb") {
			t.Errorf("%s: message %q does not say why", path, msg.Message)
		}
		if took > 5*time.Second {
			t.Errorf("%s: a %d-byte bomb was refused after %v, want within 5s", path, len(bomb), took)
		}
		t.Logf("%s: %d-byte body expanding to 17 GiB refused in %v", path, len(bomb), took.Round(time.Millisecond))
		if left := e.transferTemporaries(t); len(left) > 0 {
			t.Errorf("%s: temporaries left: %v", path, left)
		}
	}
}
