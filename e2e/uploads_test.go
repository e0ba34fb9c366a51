package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/testimage"
)

const (
	junkFile    = "notes/junk.txt"
	archiveFile = "images/busybox.tar"
)

// TestUploadDeploysImageArchive: an upload with an image archive and a junk
// file ends done, the image is in the engine, and the junk file is the one
// error.
func TestUploadDeploysImageArchive(t *testing.T) {
	ctx := context.Background()
	s := startStack(t, ctx)
	const tag = "localhost/berth-e2e-busybox:latest"

	id := s.createUpload(map[string][]byte{
		archiveFile: busyboxArchive(t, tag),
		junkFile:    []byte("not something the engine can deploy\n"),
	})
	s.markForProcessing(id)
	u := s.waitFor(id, 2*time.Minute, "status done", func(u upload) bool { return u.Status == "done" })

	checkDone(t, u, 2, 2, 1)
	errs := s.uploadErrors(id)
	if len(errs) != 1 || errs[0].File != junkFile || !strings.Contains(errs[0].Message, "unsupported file type") {
		t.Errorf("upload errors = %+v, want exactly one for %s (unsupported file type)", errs, junkFile)
	}
	if names := s.engineImageNames(); !slices.Contains(names, tag) {
		t.Errorf("engine images = %v, want %s among them", names, tag)
	}
	// uploads records the names ImagesLoad reported for the archive.
	if images := s.uploadImages(id); len(images) != 1 || images[0] != (deployedImage{File: archiveFile, Name: tag}) {
		t.Errorf("upload images = %+v, want exactly %s from %s", images, tag, archiveFile)
	}
	if intOf(u.Images) != 1 {
		t.Errorf("done upload counts %d images, want 1", intOf(u.Images))
	}
	// The deployer records the names ImagesLoad reported in the uploads log.
	if log := s.containerLog(s.uploads); !strings.Contains(log, "image archive loaded") || !strings.Contains(log, tag) {
		t.Errorf("uploads log does not record the loaded image %s:\n%s", tag, log)
	}
}

// TestEngineRestartMidProcessing: the engine goes away while an upload is
// processing; the upload waits (uploads is not ready meanwhile), resumes when
// the engine is back, and ends done with every file deployed exactly once.
func TestEngineRestartMidProcessing(t *testing.T) {
	ctx := context.Background()
	s := startStack(t, ctx)
	tags := []string{"localhost/berth-e2e-one:latest", "localhost/berth-e2e-two:latest", "localhost/berth-e2e-oci:latest"}

	id := s.createUpload(map[string][]byte{
		"a-junk.txt":        []byte("junk\n"),
		"b/first.tar":       busyboxArchive(t, tags[0]),
		"c/second.tar.gz":   gzipped(t, busyboxArchive(t, tags[1])),
		"d-corrupt.tar":     []byte("this is not a tar archive at all"),
		"e-more-junk.conf":  []byte("x=1\n"),
		"f/third-copy.tar":  busyboxArchive(t, tags[0]),
		"g/readme.markdown": []byte("# readme\n"),
		"h/oci-layout.tar":  imageArchive(t, testimage.OCI, testimage.Busybox(tags[2])),
	})

	timeout := 10 * time.Second
	if err := s.engine.Stop(ctx, &timeout); err != nil {
		t.Fatalf("stopping the engine: %v", err)
	}
	s.markForProcessing(id)
	// The worker claims the upload, counts its files and waits for the engine
	// at the first file it deploys: image archives go first.
	stalled := s.waitFor(id, time.Minute, "processing with the engine down", func(u upload) bool {
		return u.Status == "processing" && intOf(u.FilesTotal) == 8
	})
	t.Logf("engine stopped: upload %s processing, %d of %d files recorded", id, intOf(stalled.FilesProcessed), intOf(stalled.FilesTotal))
	time.Sleep(2 * time.Second)
	if again := s.getUpload(id); again.Status != "processing" || intOf(again.FilesProcessed) != intOf(stalled.FilesProcessed) ||
		intOf(again.FilesProcessed) >= 8 {
		t.Fatalf("with the engine down the upload moved on: %+v then %+v", stalled, again)
	}
	if status, body := call(t, http.MethodGet, s.uploadsURL()+"/readyz", "", nil); status != http.StatusServiceUnavailable {
		t.Errorf("uploads /readyz with the engine down = %d %s, want 503", status, body)
	}

	if err := s.engine.Start(ctx); err != nil {
		t.Fatalf("starting the engine again: %v", err)
	}
	t.Logf("engine started again")
	u := s.waitFor(id, 3*time.Minute, "status done", func(u upload) bool { return u.Status == "done" })
	checkDone(t, u, 8, 8, 4)
	got := map[string]string{}
	for _, e := range s.uploadErrors(id) {
		if _, dup := got[e.File]; dup {
			t.Errorf("file %s has two error entries", e.File)
		}
		got[e.File] = e.Message
	}
	for _, file := range []string{"a-junk.txt", "e-more-junk.conf", "g/readme.markdown"} {
		if !strings.Contains(got[file], "unsupported file type") {
			t.Errorf("error of %s = %q, want unsupported file type", file, got[file])
		}
	}
	if msg := got["d-corrupt.tar"]; msg == "" || strings.Contains(msg, "unsupported") {
		t.Errorf("error of the corrupt archive = %q, want the engine's refusal", msg)
	}
	if len(got) != 4 {
		t.Errorf("errors = %v, want exactly the three junk files and the corrupt archive", got)
	}
	names := s.engineImageNames()
	for _, tag := range tags {
		if !slices.Contains(names, tag) {
			t.Errorf("engine images = %v, want %s among them", names, tag)
		}
	}
	if status, body := call(t, http.MethodGet, s.uploadsURL()+"/readyz", "", nil); status != http.StatusOK {
		t.Errorf("uploads /readyz with the engine back = %d %s, want 200", status, body)
	}
}

// gzipped compresses data: uploads hands *.tar.gz archives to the engine as
// they are, and the engine decompresses them.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEngineKilledDuringLoad: the engine container is killed (SIGKILL, no
// graceful shutdown) while the upload is processing large archives. The
// interrupted load is neither recorded nor skipped: once the engine is back
// the archive is sent again, every archive is loaded and the upload ends done
// without errors.
func TestEngineKilledDuringLoad(t *testing.T) {
	ctx := context.Background()
	s := startStack(t, ctx)
	const archives = 3
	const payloadSize = 48 << 20
	files := map[string][]byte{}
	var tags []string
	for i := range archives {
		tag := fmt.Sprintf("localhost/berth-e2e-big-%d:latest", i)
		tags = append(tags, tag)
		files[fmt.Sprintf("big-%d.tar", i)] = bigArchive(t, tag, payloadSize, int64(i+1))
	}
	id := s.createUpload(files)
	s.markForProcessing(id)
	s.waitFor(id, time.Minute, "processing of the first archive", func(u upload) bool {
		return u.Status == "processing" && intOf(u.FilesTotal) == archives
	})
	kill := time.Duration(0)
	if err := s.engine.Stop(ctx, &kill); err != nil {
		t.Fatalf("killing the engine: %v", err)
	}
	killedAt := s.getUpload(id)
	t.Logf("engine killed with %d of %d archives recorded", intOf(killedAt.FilesProcessed), archives)
	if killedAt.Status == "done" {
		t.Fatalf("the upload finished before the engine was killed; make the archives larger")
	}
	if err := s.engine.Start(ctx); err != nil {
		t.Fatalf("starting the engine again: %v", err)
	}
	u := s.waitFor(id, 3*time.Minute, "status done", func(u upload) bool { return u.Status == "done" })
	if intOf(u.FilesProcessed) != archives || intOf(u.Errors) != 0 {
		t.Errorf("done upload: processed %d errors %d, want %d and 0; errors %+v",
			intOf(u.FilesProcessed), intOf(u.Errors), archives, s.uploadErrors(id))
	}
	names := s.engineImageNames()
	for _, tag := range tags {
		if !slices.Contains(names, tag) {
			t.Errorf("engine images = %v, want %s among them", names, tag)
		}
	}
	// Each archive's image is recorded once, although the interrupted one was
	// sent to the engine again.
	images := s.uploadImages(id)
	if len(images) != archives || intOf(u.Images) != archives {
		t.Errorf("upload images = %+v (count %d), want one per archive", images, intOf(u.Images))
	}
	for i, img := range images {
		if want := (deployedImage{File: fmt.Sprintf("big-%d.tar", i), Name: tags[i]}); img != want {
			t.Errorf("upload image %d = %+v, want %+v", i, img, want)
		}
	}
	// engineclient retries a failed connection a few times with backoff,
	// reopening the archive; only when those run out does the upload wait.
	if strings.Contains(s.containerLog(s.uploads), "deploy target unavailable") {
		t.Logf("the interrupted load outlasted the client's retries: the upload waited for the engine")
	} else {
		t.Logf("the interrupted load succeeded on one of the client's retries")
	}
}

// deployedImage is one image name uploads recorded for a deployed file.
type deployedImage struct {
	File string `json:"file"`
	Name string `json:"name"`
}

// uploadImages lists the image names uploads recorded for the upload's files.
func (s *stack) uploadImages(id string) []deployedImage {
	s.t.Helper()
	return uploadsGet[[]deployedImage](s, "/v1/uploads/"+id+"/images")
}
