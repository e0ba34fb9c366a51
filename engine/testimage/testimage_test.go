package testimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// readTar returns the members of an archive by name.
func readTar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = body
	}
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func requireBusybox(t *testing.T) {
	need.All(t, "test image tests (busybox-static)", BusyboxPath)
}

func TestDockerArchiveIsConsistent(t *testing.T) {
	requireBusybox(t)
	var buf bytes.Buffer
	imgs := []Image{
		{RepoTags: []string{"localhost/one:1", "localhost/one:latest"}, Config: Config{Cmd: []string{"echo", "one"}, Labels: map[string]string{"k": "v"}}},
		{RepoTags: []string{"localhost/two:1"}, Layers: []Layer{{Files: []File{{Path: "/hello", Data: []byte("hi")}}}}},
	}
	if err := DockerArchive(&buf, imgs...); err != nil {
		t.Fatal(err)
	}
	members := readTar(t, buf.Bytes())
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(members["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 2 {
		t.Fatalf("manifest has %d images, want 2", len(manifest))
	}
	for i, entry := range manifest {
		config := members[entry.Config]
		if sha(config)+".json" != entry.Config {
			t.Errorf("config %s does not match its digest", entry.Config)
		}
		var cfg struct {
			Rootfs struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
			Config struct{ Cmd []string }
		}
		if err := json.Unmarshal(config, &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Rootfs.DiffIDs) != len(entry.Layers) {
			t.Fatalf("image %d: %d diff_ids for %d layers", i, len(cfg.Rootfs.DiffIDs), len(entry.Layers))
		}
		for j, layer := range entry.Layers {
			if "sha256:"+sha(members[layer]) != cfg.Rootfs.DiffIDs[j] {
				t.Errorf("image %d layer %d: digest does not match diff_id", i, j)
			}
		}
		if strings.Join(entry.RepoTags, ",") != strings.Join(imgs[i].RepoTags, ",") {
			t.Errorf("image %d tags %v, want %v", i, entry.RepoTags, imgs[i].RepoTags)
		}
	}
	// Both images share the busybox layer: it is stored once.
	if manifest[0].Layers[0] != manifest[1].Layers[0] {
		t.Error("base layers differ")
	}
	base := readTar(t, members[manifest[0].Layers[0]])
	if len(base["bin/busybox"]) == 0 {
		t.Error("base layer lacks bin/busybox")
	}
}

func TestOCIArchiveIsConsistent(t *testing.T) {
	requireBusybox(t)
	var buf bytes.Buffer
	if err := OCIArchive(&buf, Busybox("localhost/oci:1", "true"), Image{RepoTags: []string{"localhost/big:1"}, NoBase: true, Layers: []Layer{RandomLayer(1<<20, 7)}}); err != nil {
		t.Fatal(err)
	}
	members := readTar(t, buf.Bytes())
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(members["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 2 {
		t.Fatalf("index has %d manifests, want 2", len(index.Manifests))
	}
	for _, desc := range index.Manifests {
		blob := members["blobs/sha256/"+strings.TrimPrefix(desc.Digest, "sha256:")]
		if "sha256:"+sha(blob) != desc.Digest {
			t.Fatalf("manifest %s missing or corrupt", desc.Digest)
		}
		var m struct {
			Config struct{ Digest string }
			Layers []struct {
				Digest string
				Size   int64
			}
		}
		if err := json.Unmarshal(blob, &m); err != nil {
			t.Fatal(err)
		}
		for _, l := range m.Layers {
			data := members["blobs/sha256/"+strings.TrimPrefix(l.Digest, "sha256:")]
			if int64(len(data)) != l.Size || "sha256:"+sha(data) != l.Digest {
				t.Errorf("layer %s missing or corrupt", l.Digest)
			}
		}
	}
	if index.Manifests[1].Annotations["org.opencontainers.image.ref.name"] != "localhost/big:1" {
		t.Errorf("annotations %v", index.Manifests[1].Annotations)
	}
}

func TestRandomLayerIsDeterministicAndIncompressible(t *testing.T) {
	read := func(seed int64) []byte {
		data, err := io.ReadAll(RandomFile("x", 4096, seed).Content())
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if !bytes.Equal(read(1), read(1)) {
		t.Error("same seed gave different data")
	}
	if bytes.Equal(read(1), read(2)) {
		t.Error("different seeds gave the same data")
	}
}

func TestNoImages(t *testing.T) {
	if err := DockerArchive(io.Discard); err == nil {
		t.Error("an archive without images was written")
	}
}
