// Package testimage builds container image archives from local files, for
// tests and benchmarks on machines that cannot download images. The base
// layer is the host's static busybox (Debian's busybox-static) with its
// applets linked under /bin, so the images run real commands.
//
// It uses only the standard library: the engine's tests, the Pact provider
// tests and the e2e tests all import it.
package testimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// BusyboxPath is where Debian's busybox-static installs the static binary.
const BusyboxPath = "/bin/busybox"

// DefaultCreated is the creation time of images that set none: a fixed time
// keeps archives (and so image IDs) reproducible.
var DefaultCreated = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Applets are the busybox commands linked into /bin of the base layer.
var Applets = []string{
	"sh", "ash", "cat", "chmod", "cp", "date", "dd", "echo", "env", "false", "grep", "head",
	"hostname", "id", "kill", "ln", "ls", "mkdir", "mv", "nc", "printenv", "ps", "pwd", "rm",
	"sed", "seq", "sh", "sleep", "sort", "stat", "tail", "tee", "test", "top", "touch", "true",
	"uname", "wc", "wget", "whoami", "yes", "[",
}

// Config is the runtime configuration recorded in an image.
type Config struct {
	Cmd        []string
	Entrypoint []string
	Env        []string
	Labels     map[string]string
	WorkingDir string
	User       string
	StopSignal string
	// ExposedPorts are "80/tcp"-style ports.
	ExposedPorts []string
	// Volumes are paths declared as volumes.
	Volumes []string
	// Healthcheck is the Docker-format health check (kept only in Docker archives).
	Healthcheck *Healthcheck
}

// Healthcheck is a Docker image health check.
type Healthcheck struct {
	Test     []string
	Interval time.Duration
	Timeout  time.Duration
	Retries  int
}

// File is one entry of a layer. Exactly one of Data, Content (with Size),
// Linkname (a symlink) or Dir is used.
type File struct {
	// Path inside the image, with or without a leading slash.
	Path string
	// Mode is the permission bits (0644 for files, 0755 for dirs, 0777 for
	// symlinks when zero).
	Mode int64
	Data []byte
	// Content streams Size bytes, for files too big to hold in memory.
	Content func() io.Reader
	Size    int64
	// Linkname makes the entry a symbolic link to Linkname.
	Linkname string
	// Dir makes the entry a directory.
	Dir bool
}

// Layer is a set of files applied on top of the layers below it.
type Layer struct {
	Files []File
}

// Image describes one image of an archive.
type Image struct {
	// RepoTags name the image ("localhost/app:1"); none makes an untagged image.
	RepoTags []string
	Config   Config
	// NoBase leaves out the busybox base layer.
	NoBase bool
	// Layers are added above the base layer, in order.
	Layers []Layer
	// Created defaults to DefaultCreated.
	Created time.Time
	// Author and Comment go into the configuration and its history.
	Author  string
	Comment string
	// BareHistory leaves out the closing history step that records the
	// configuration, so the history holds one step per layer. An image whose
	// layers extend another bare image's by one is then that image's child,
	// by the rule Podman uses for parents (same layers and history, plus one step).
	BareHistory bool
}

// BusyboxLayer is the base layer: /bin/busybox, its applets, and a minimal
// /etc, /tmp and /root.
func BusyboxLayer() (Layer, error) {
	st, err := os.Stat(BusyboxPath)
	if err != nil {
		return Layer{}, fmt.Errorf("testimage: %s (install busybox-static): %w", BusyboxPath, err)
	}
	files := []File{
		{Path: "bin", Dir: true},
		{Path: "bin/busybox", Mode: 0o755, Size: st.Size(), Content: fileContent(BusyboxPath)},
		{Path: "etc", Dir: true},
		{Path: "etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "etc/group", Data: []byte("root:x:0:\nnobody:x:65534:\n")},
		{Path: "tmp", Dir: true, Mode: 0o1777},
		{Path: "root", Dir: true, Mode: 0o700},
		{Path: "proc", Dir: true},
		{Path: "sys", Dir: true},
		{Path: "dev", Dir: true},
		{Path: "var", Dir: true},
	}
	seen := map[string]bool{}
	for _, applet := range Applets {
		if seen[applet] {
			continue
		}
		seen[applet] = true
		files = append(files, File{Path: "bin/" + applet, Linkname: "busybox"})
	}
	return Layer{Files: files}, nil
}

// fileContent streams a host file.
func fileContent(hostPath string) func() io.Reader {
	return func() io.Reader {
		f, err := os.Open(hostPath)
		if err != nil {
			return &errReader{err}
		}
		return &closingReader{f: f}
	}
}

// RandomFile is a file of size pseudo-random (incompressible) bytes from seed,
// generated while the archive is written.
func RandomFile(filePath string, size, seed int64) File {
	return File{Path: filePath, Mode: 0o644, Size: size, Content: func() io.Reader {
		return io.LimitReader(rand.New(rand.NewSource(seed)), size)
	}}
}

// RandomLayer is a layer holding one random file of size bytes (for the big
// load, push and pull benchmarks).
func RandomLayer(size, seed int64) Layer {
	return Layer{Files: []File{{Path: "data", Dir: true}, RandomFile("data/random.bin", size, seed)}}
}

// builtLayer is a layer tar written to a temporary file.
type builtLayer struct {
	path   string
	diffID string // "sha256:<hex>"
	size   int64
}

// builtImage is an image whose layers and config are ready to archive.
type builtImage struct {
	image      Image
	layers     []*builtLayer
	config     []byte
	configHash string
}

// builder holds the temporary files of one archive.
type builder struct {
	dir    string
	layers map[string]*builtLayer // by diffID, to share identical layers
}

func newBuilder() (*builder, error) {
	dir, err := os.MkdirTemp("", "testimage-")
	if err != nil {
		return nil, err
	}
	return &builder{dir: dir, layers: map[string]*builtLayer{}}, nil
}

func (b *builder) close() { os.RemoveAll(b.dir) }

// build writes the image's layers and renders its configuration.
func (b *builder) build(img Image) (*builtImage, error) {
	var layers []Layer
	if !img.NoBase {
		base, err := BusyboxLayer()
		if err != nil {
			return nil, err
		}
		layers = append(layers, base)
	}
	layers = append(layers, img.Layers...)
	created := img.Created
	if created.IsZero() {
		created = DefaultCreated
	}
	out := &builtImage{image: img}
	for _, layer := range layers {
		built, err := b.writeLayer(layer, created)
		if err != nil {
			return nil, err
		}
		out.layers = append(out.layers, built)
	}
	config, err := renderConfig(img, created, out.layers)
	if err != nil {
		return nil, err
	}
	out.config = config
	sum := sha256.Sum256(config)
	out.configHash = hex.EncodeToString(sum[:])
	return out, nil
}

// writeLayer writes layer as an uncompressed tar and digests it.
func (b *builder) writeLayer(layer Layer, mtime time.Time) (*builtLayer, error) {
	f, err := os.CreateTemp(b.dir, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	counter := &countWriter{}
	tw := tar.NewWriter(io.MultiWriter(f, h, counter))
	files := append([]File(nil), layer.Files...)
	sort.SliceStable(files, func(i, j int) bool { return cleanPath(files[i].Path) < cleanPath(files[j].Path) })
	for _, file := range files {
		if err := writeEntry(tw, file, mtime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	diffID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if existing := b.layers[diffID]; existing != nil {
		os.Remove(f.Name())
		return existing, nil
	}
	built := &builtLayer{path: f.Name(), diffID: diffID, size: counter.n}
	b.layers[diffID] = built
	return built, nil
}

// writeEntry writes one file of a layer.
func writeEntry(tw *tar.Writer, file File, mtime time.Time) error {
	name := cleanPath(file.Path)
	if name == "" {
		return errors.New("testimage: empty file path")
	}
	hdr := &tar.Header{Name: name, ModTime: mtime, Mode: file.Mode, Uname: "root", Gname: "root", Format: tar.FormatPAX}
	switch {
	case file.Dir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		if hdr.Mode == 0 {
			hdr.Mode = 0o755
		}
		return tw.WriteHeader(hdr)
	case file.Linkname != "":
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = file.Linkname
		if hdr.Mode == 0 {
			hdr.Mode = 0o777
		}
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag = tar.TypeReg
	if hdr.Mode == 0 {
		hdr.Mode = 0o644
	}
	var content io.Reader
	if file.Content != nil {
		hdr.Size = file.Size
		content = file.Content()
	} else {
		hdr.Size = int64(len(file.Data))
		content = strings.NewReader(string(file.Data))
	}
	if c, ok := content.(io.Closer); ok {
		defer c.Close()
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, content)
	if err != nil {
		return fmt.Errorf("testimage: writing %s: %w", name, err)
	}
	if n != hdr.Size {
		return fmt.Errorf("testimage: %s: got %d bytes, want %d", name, n, hdr.Size)
	}
	return nil
}

// cleanPath makes a layer path relative and clean.
func cleanPath(p string) string {
	p = path.Clean("/" + p)
	return strings.TrimPrefix(p, "/")
}

// renderConfig builds the image configuration (Docker and OCI share this shape).
func renderConfig(img Image, created time.Time, layers []*builtLayer) ([]byte, error) {
	type healthcheck struct {
		Test     []string `json:"Test,omitempty"`
		Interval int64    `json:"Interval,omitempty"`
		Timeout  int64    `json:"Timeout,omitempty"`
		Retries  int      `json:"Retries,omitempty"`
	}
	type runConfig struct {
		User         string              `json:"User,omitempty"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
		Env          []string            `json:"Env,omitempty"`
		Entrypoint   []string            `json:"Entrypoint,omitempty"`
		Cmd          []string            `json:"Cmd,omitempty"`
		Volumes      map[string]struct{} `json:"Volumes,omitempty"`
		WorkingDir   string              `json:"WorkingDir,omitempty"`
		Labels       map[string]string   `json:"Labels,omitempty"`
		StopSignal   string              `json:"StopSignal,omitempty"`
		Healthcheck  *healthcheck        `json:"Healthcheck,omitempty"`
	}
	type history struct {
		Created    string `json:"created"`
		CreatedBy  string `json:"created_by,omitempty"`
		Author     string `json:"author,omitempty"`
		Comment    string `json:"comment,omitempty"`
		EmptyLayer bool   `json:"empty_layer,omitempty"`
	}
	cfg := img.Config
	rc := runConfig{User: cfg.User, Env: cfg.Env, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, WorkingDir: cfg.WorkingDir, Labels: cfg.Labels, StopSignal: cfg.StopSignal}
	if len(rc.Env) == 0 {
		rc.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	if len(cfg.ExposedPorts) > 0 {
		rc.ExposedPorts = map[string]struct{}{}
		for _, p := range cfg.ExposedPorts {
			rc.ExposedPorts[p] = struct{}{}
		}
	}
	if len(cfg.Volumes) > 0 {
		rc.Volumes = map[string]struct{}{}
		for _, v := range cfg.Volumes {
			rc.Volumes[v] = struct{}{}
		}
	}
	if hc := cfg.Healthcheck; hc != nil {
		rc.Healthcheck = &healthcheck{Test: hc.Test, Interval: int64(hc.Interval), Timeout: int64(hc.Timeout), Retries: hc.Retries}
	}
	diffIDs := make([]string, 0, len(layers))
	hist := make([]history, 0, len(layers)+1)
	for i, l := range layers {
		diffIDs = append(diffIDs, l.diffID)
		by := fmt.Sprintf("testimage layer %d", i)
		if i == 0 && !img.NoBase {
			by = "testimage busybox base"
		}
		hist = append(hist, history{Created: created.Format(time.RFC3339), CreatedBy: by, Author: img.Author})
	}
	if !img.BareHistory {
		hist = append(hist, history{Created: created.Format(time.RFC3339), CreatedBy: "testimage config", Author: img.Author, Comment: img.Comment, EmptyLayer: true})
	}
	doc := map[string]any{
		"created":      created.Format(time.RFC3339Nano),
		"architecture": hostArch(),
		"os":           "linux",
		"config":       rc,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": diffIDs},
		"history":      hist,
	}
	if img.Author != "" {
		doc["author"] = img.Author
	}
	if img.Comment != "" {
		doc["comment"] = img.Comment
	}
	return json.Marshal(doc)
}

// countWriter counts bytes written.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

type closingReader struct{ f *os.File }

func (r *closingReader) Read(p []byte) (int, error) { return r.f.Read(p) }
func (r *closingReader) Close() error               { return r.f.Close() }
