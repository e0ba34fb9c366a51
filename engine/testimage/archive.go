package testimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Format is an archive format.
type Format string

// Archive formats, named as Podman names them.
const (
	Docker Format = "docker-archive"
	OCI    Format = "oci-archive"
)

// DockerArchive writes images as one docker-archive (what `docker save` and
// `podman save` write): manifest.json, a config file per image, one
// uncompressed layer.tar per distinct layer.
func DockerArchive(w io.Writer, images ...Image) error {
	return writeArchive(w, Docker, images)
}

// OCIArchive writes images as one oci-archive: an OCI image layout with one
// manifest per image; each tag becomes an org.opencontainers.image.ref.name
// annotation holding the full name.
func OCIArchive(w io.Writer, images ...Image) error {
	return writeArchive(w, OCI, images)
}

// Write writes images in format to w.
func Write(w io.Writer, format Format, images ...Image) error {
	return writeArchive(w, format, images)
}

// WriteFile writes images in format to a new file at path.
func WriteFile(path string, format Format, images ...Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeArchive(f, format, images); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// Busybox is a tagged busybox image with cmd as its command.
func Busybox(tag string, cmd ...string) Image {
	if len(cmd) == 0 {
		cmd = []string{"sh"}
	}
	return Image{RepoTags: []string{tag}, Config: Config{Cmd: cmd}}
}

func writeArchive(w io.Writer, format Format, images []Image) error {
	if len(images) == 0 {
		return errors.New("testimage: no images")
	}
	b, err := newBuilder()
	if err != nil {
		return err
	}
	defer b.close()
	built := make([]*builtImage, 0, len(images))
	for _, img := range images {
		bi, err := b.build(img)
		if err != nil {
			return err
		}
		built = append(built, bi)
	}
	tw := tar.NewWriter(w)
	switch format {
	case Docker:
		err = writeDocker(tw, built)
	case OCI:
		err = writeOCI(tw, built)
	default:
		err = fmt.Errorf("testimage: unknown format %q", format)
	}
	if err != nil {
		return err
	}
	return tw.Close()
}

// writeDocker lays out a docker-archive.
func writeDocker(tw *tar.Writer, images []*builtImage) error {
	type manifestEntry struct {
		Config   string   `json:"Config"`
		RepoTags []string `json:"RepoTags"`
		Layers   []string `json:"Layers"`
	}
	var manifest []manifestEntry
	written := map[string]bool{}
	for _, img := range images {
		entry := manifestEntry{Config: img.configHash + ".json", RepoTags: dockerTags(img.image.RepoTags)}
		if entry.RepoTags == nil {
			entry.RepoTags = []string{}
		}
		if !written[entry.Config] {
			written[entry.Config] = true
			if err := addBytes(tw, entry.Config, img.config); err != nil {
				return err
			}
		}
		for _, layer := range img.layers {
			name := strings.TrimPrefix(layer.diffID, "sha256:") + "/layer.tar"
			entry.Layers = append(entry.Layers, name)
			if written[name] {
				continue
			}
			written[name] = true
			if err := addDir(tw, strings.TrimSuffix(name, "/layer.tar")); err != nil {
				return err
			}
			if err := addFile(tw, name, layer.path, layer.size); err != nil {
				return err
			}
		}
		manifest = append(manifest, entry)
	}
	data, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	return addBytes(tw, "manifest.json", data)
}

// dockerTags keeps names as given: docker-archive readers normalize them.
func dockerTags(tags []string) []string {
	return append([]string(nil), tags...)
}

// writeOCI lays out an oci-archive.
func writeOCI(tw *tar.Writer, images []*builtImage) error {
	const (
		manifestType = "application/vnd.oci.image.manifest.v1+json"
		configType   = "application/vnd.oci.image.config.v1+json"
		layerType    = "application/vnd.oci.image.layer.v1.tar"
	)
	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	if err := addBytes(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	for _, dir := range []string{"blobs", "blobs/sha256"} {
		if err := addDir(tw, dir); err != nil {
			return err
		}
	}
	written := map[string]bool{}
	var index []descriptor
	for _, img := range images {
		m := struct {
			SchemaVersion int          `json:"schemaVersion"`
			MediaType     string       `json:"mediaType"`
			Config        descriptor   `json:"config"`
			Layers        []descriptor `json:"layers"`
		}{SchemaVersion: 2, MediaType: manifestType}
		m.Config = descriptor{MediaType: configType, Digest: "sha256:" + img.configHash, Size: int64(len(img.config))}
		if !written[m.Config.Digest] {
			written[m.Config.Digest] = true
			if err := addBytes(tw, "blobs/sha256/"+img.configHash, img.config); err != nil {
				return err
			}
		}
		m.Layers = []descriptor{}
		for _, layer := range img.layers {
			m.Layers = append(m.Layers, descriptor{MediaType: layerType, Digest: layer.diffID, Size: layer.size})
			if written[layer.diffID] {
				continue
			}
			written[layer.diffID] = true
			if err := addFile(tw, "blobs/sha256/"+strings.TrimPrefix(layer.diffID, "sha256:"), layer.path, layer.size); err != nil {
				return err
			}
		}
		data, err := json.Marshal(m)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		hexSum := hex.EncodeToString(sum[:])
		if !written[hexSum] {
			written[hexSum] = true
			if err := addBytes(tw, "blobs/sha256/"+hexSum, data); err != nil {
				return err
			}
		}
		desc := descriptor{MediaType: manifestType, Digest: "sha256:" + hexSum, Size: int64(len(data))}
		if len(img.image.RepoTags) == 0 {
			index = append(index, desc)
		}
		for _, tag := range img.image.RepoTags {
			tagged := desc
			tagged.Annotations = map[string]string{"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": tag}
			index = append(index, tagged)
		}
	}
	data, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": index})
	if err != nil {
		return err
	}
	return addBytes(tw, "index.json", data)
}

// archiveTime is the modification time of archive members.
var archiveTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func addDir(tw *tar.Writer, name string) error {
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: archiveTime})
}

func addBytes(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: archiveTime}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func addFile(tw *tar.Writer, name, hostPath string, size int64) error {
	f, err := os.Open(hostPath)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: archiveTime}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, size)
	return err
}

// hostArch is the image architecture matching this machine, so the engine
// picks the image without platform overrides.
func hostArch() string {
	return runtime.GOARCH
}
