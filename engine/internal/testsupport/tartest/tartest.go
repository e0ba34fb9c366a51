// Package tartest writes the small tar streams tests send: build
// contexts, copies into containers and volumes, quadlet and kube uploads,
// layers. It imports nothing of the engine, so that every test, unit or
// integration, can use it.
package tartest

import (
	"archive/tar"
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// ModTime is every entry's modification time: a fixed one, so that the
// same entries make the same stream (a build's cache keys, digests).
var ModTime = time.Unix(1700000000, 0)

// Of writes a tar stream of name/content pairs, in their order: a name
// ending in "/" is a directory (0755), content "-> TARGET" a symbolic
// link, "=> TARGET" a hard link, any other content a regular file (0644)
// holding it.
func Of(t testing.TB, pairs ...string) []byte {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatalf("tartest.Of: %d strings, want name/content pairs", len(pairs))
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < len(pairs); i += 2 {
		name, content := pairs[i], pairs[i+1]
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(content)), ModTime: ModTime}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case strings.HasPrefix(content, "-> "):
			h.Typeflag, h.Mode, h.Linkname, h.Size = tar.TypeSymlink, 0o777, strings.TrimPrefix(content, "-> "), 0
		case strings.HasPrefix(content, "=> "):
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, strings.TrimPrefix(content, "=> "), 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(content)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Files is Of for the entries of a map, by name: the same map makes the
// same stream.
func Files(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var pairs []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		pairs = append(pairs, name, files[name])
	}
	return Of(t, pairs...)
}
