package e2e

import (
	"bytes"
	"testing"

	"github.com/berth-project/berth/engine/testimage"
)

// imageArchive returns an archive in format holding images, built by
// engine/testimage on top of Debian's busybox-static.
func imageArchive(t *testing.T, format testimage.Format, images ...testimage.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := testimage.Write(&buf, format, images...); err != nil {
		t.Fatalf("building a %s: %v", format, err)
	}
	return buf.Bytes()
}

// busyboxArchive is a docker-archive of one busybox image tagged tag.
func busyboxArchive(t *testing.T, tag string) []byte {
	t.Helper()
	return imageArchive(t, testimage.Docker, testimage.Busybox(tag))
}

// bigArchive is a docker-archive of a busybox image tagged tag with a layer of
// size random bytes above the base, to make its load take a while.
func bigArchive(t *testing.T, tag string, size, seed int64) []byte {
	t.Helper()
	image := testimage.Busybox(tag)
	image.Layers = []testimage.Layer{testimage.RandomLayer(size, seed)}
	return imageArchive(t, testimage.Docker, image)
}
