package contracts

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// contractImage is the tag inside the archive the load interaction sends.
const contractImage = "localhost/berth-contract:latest"

// archiveTime is the fixed timestamp of every entry, so the archive (and the
// pact file that embeds it) is byte-for-byte reproducible.
var archiveTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// tinyImageArchive returns a docker-archive of a one-layer image tagged tag,
// holding a single small file. It is small on purpose: the pact file carries
// it, base64-encoded, as the body of the image load interaction.
func tinyImageArchive(t *testing.T, tag string) []byte {
	t.Helper()
	layer := tarOf(t, []tarEntry{
		{name: "berth-contract.txt", body: []byte("loaded through the berth-uploads -> berth-engine contract\n")},
	})
	layerSum := sha256.Sum256(layer)
	layerHex := hex.EncodeToString(layerSum[:])

	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      archiveTime.Format(time.RFC3339),
		"config":       map[string]any{"Cmd": []string{"/berth-contract.txt"}, "Labels": map[string]string{"org.berth.contract": "true"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
		"history":      []map[string]any{{"created": archiveTime.Format(time.RFC3339), "created_by": "berth contracts test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   "config.json",
		"RepoTags": []string{tag},
		"Layers":   []string{"layer.tar"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return v7TarOf(t, []tarEntry{
		{name: "layer.tar", body: layer},
		{name: "config.json", body: config},
		{name: "manifest.json", body: manifest},
	})
}

// v7TarOf writes a tar archive with pre-POSIX (V7) headers, which carry no
// "ustar" magic. The Pact FFI matches a binary request body by the content
// type it sniffs from the bytes and pact-go declares such bodies as
// application/octet-stream; a V7 archive sniffs as exactly that, while every
// tar reader (Go's archive/tar in containers/image included) reads it.
func v7TarOf(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, e := range entries {
		if len(e.name) >= 100 {
			t.Fatalf("tar entry name %q too long for a V7 header", e.name)
		}
		var hdr [512]byte
		copy(hdr[0:100], e.name)
		copy(hdr[100:108], "0000644\x00")
		copy(hdr[108:116], "0000000\x00")
		copy(hdr[116:124], "0000000\x00")
		copy(hdr[124:136], fmt.Sprintf("%011o\x00", len(e.body)))
		copy(hdr[136:148], fmt.Sprintf("%011o\x00", archiveTime.Unix()))
		hdr[156] = '0'
		copy(hdr[148:156], "        ")
		sum := 0
		for _, b := range hdr {
			sum += int(b)
		}
		copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
		buf.Write(hdr[:])
		buf.Write(e.body)
		if pad := len(e.body) % 512; pad != 0 {
			buf.Write(make([]byte, 512-pad))
		}
	}
	buf.Write(make([]byte, 1024))
	return buf.Bytes()
}

type tarEntry struct {
	name string
	body []byte
}

func tarOf(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, ModTime: archiveTime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
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
