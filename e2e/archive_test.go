package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// busyboxBinary is Debian's busybox-static, the only binary of the test image.
const busyboxBinary = "/bin/busybox"

// busyboxArchive returns a docker-archive of a one-layer busybox image tagged
// tag. The layer holds busybox-static as /bin/busybox and /bin/sh.
func busyboxArchive(t *testing.T, tag string) []byte {
	t.Helper()
	return busyboxArchiveWith(t, tag, nil)
}

// busyboxArchiveWith is busyboxArchive with payload added as /payload.bin,
// to make an archive as large (and its load as long) as a test needs.
func busyboxArchiveWith(t *testing.T, tag string, payload []byte) []byte {
	t.Helper()
	binary, err := os.ReadFile(busyboxBinary)
	if err != nil {
		t.Fatalf("reading %s (package busybox-static): %v", busyboxBinary, err)
	}
	created := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	entries := []tarEntry{
		{name: "bin/", dir: true},
		{name: "bin/busybox", body: binary, mode: 0o755},
		{name: "bin/sh", link: "busybox"},
	}
	if payload != nil {
		entries = append(entries, tarEntry{name: "payload.bin", body: payload})
	}
	layer := tarArchive(t, created, entries)
	layerSum := sha256.Sum256(layer)
	layerHex := hex.EncodeToString(layerSum[:])
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      created.Format(time.RFC3339),
		"config":       map[string]any{"Cmd": []string{"/bin/sh"}, "Env": []string{"PATH=/bin"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
	})
	if err != nil {
		t.Fatal(err)
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{tag},
		"Layers":   []string{layerHex + "/layer.tar"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return tarArchive(t, created, []tarEntry{
		{name: layerHex + "/", dir: true},
		{name: layerHex + "/layer.tar", body: layer},
		{name: configName, body: config},
		{name: "manifest.json", body: manifest},
	})
}

type tarEntry struct {
	name string
	dir  bool
	link string
	mode int64
	body []byte
}

func tarArchive(t *testing.T, modTime time.Time, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, ModTime: modTime, Typeflag: tar.TypeReg, Size: int64(len(e.body)), Format: tar.FormatUSTAR}
		switch {
		case e.dir:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode, hdr.Size = tar.TypeSymlink, e.link, 0o777, 0
		case e.mode != 0:
			hdr.Mode = e.mode
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
