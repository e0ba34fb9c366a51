package imagesapi

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	imgspec "github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// BenchmarkArtifactTransferVsSkopeo measures, in one run, the push of a
// 100 MiB artifact (a gzip stream of random bytes) to a local registry and its pull back through berth's
// API, against `skopeo copy` of the same bytes as the one layer of an OCI
// image (push: OCI layout to the registry; pull: registry to an OCI
// layout). Each round uses a fresh registry, so no blob is reused. It
// reports the medians and the throughput ratios skopeo-time/berth-time
// (the goal is at least 0.8).
func BenchmarkArtifactTransferVsSkopeo(b *testing.B) {
	if os.Getenv("BERTH_BENCH") != "1" {
		b.Skip("set BERTH_BENCH=1 (make bench does) to compare with skopeo")
	}
	skopeo := need.Program(b, "image tests", "skopeo")
	e := startEngine(b)
	size := int64(100 << 20)
	dir := b.TempDir()
	payload := filepath.Join(dir, "payload.bin")
	layerDigest, diffID := writeRandomFile(b, payload, size)
	info, err := os.Stat(payload)
	if err != nil {
		b.Fatal(err)
	}
	layout := filepath.Join(dir, "layout")
	writeOneLayerLayout(b, layout, payload, layerDigest, diffID, info.Size())

	rounds := 3
	if b.N > rounds {
		rounds = b.N
	}
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for round := 0; round < rounds; round++ {
		reg := registrytest.Start(b, registrytest.Options{})
		name := reg.Host + "/bench/artifact:1"
		benchCall(b, e, http.MethodPost, "/v5.0.0/libpod/artifacts/local/add?replace=true&fileName=payload.bin&name="+url.QueryEscape(name)+"&path="+url.QueryEscape(payload), http.StatusCreated)
		times["push-berth"] = append(times["push-berth"], benchtest.Timed(func() {
			benchCall(b, e, http.MethodPost, "/v5.0.0/libpod/artifacts/"+url.PathEscape(name)+"/push?tlsVerify=false&retry=0", http.StatusOK)
		}))
		benchCall(b, e, http.MethodDelete, "/v5.0.0/libpod/artifacts/"+url.PathEscape(name), http.StatusOK)
		times["pull-berth"] = append(times["pull-berth"], benchtest.Timed(func() {
			benchCall(b, e, http.MethodPost, "/v5.0.0/libpod/artifacts/pull?tlsVerify=false&retry=0&name="+url.QueryEscape(name), http.StatusOK)
		}))

		ref := reg.Host + "/bench/skopeo:1"
		times["push-skopeo"] = append(times["push-skopeo"], benchtest.Timed(func() {
			runSkopeo(b, skopeo, "copy", "--dest-tls-verify=false", "oci:"+layout+":bench", "docker://"+ref)
		}))
		pulled := filepath.Join(b.TempDir(), "pulled")
		times["pull-skopeo"] = append(times["pull-skopeo"], benchtest.Timed(func() {
			runSkopeo(b, skopeo, "copy", "--src-tls-verify=false", "docker://"+ref, "oci:"+pulled+":bench")
		}))
		os.RemoveAll(pulled)
		reg.Stop()
	}
	b.StopTimer()
	for _, op := range []string{"push", "pull"} {
		berth, sk := benchtest.Median(times[op+"-berth"]), benchtest.Median(times[op+"-skopeo"])
		ratio := sk.Seconds() / berth.Seconds()
		b.ReportMetric(berth.Seconds(), op+"-berth-s")
		b.ReportMetric(sk.Seconds(), op+"-skopeo-s")
		b.ReportMetric(ratio, op+"-throughput-ratio")
		fmt.Printf("artifact %s of %d MiB: berth %s, skopeo %s, throughput ratio %.2f (median of %d; berth %v skopeo %v)\n",
			op, size>>20, berth.Round(time.Millisecond), sk.Round(time.Millisecond), ratio, rounds, times[op+"-berth"], times[op+"-skopeo"])
	}
}

// writeRandomFile writes a gzip stream of size random bytes (a little more
// than size on disk) and returns the digests of the file and of the
// uncompressed bytes. The payload is gzip so that skopeo, like berth,
// sends it as it is: an uncompressed layer would be compressed on the way.
func writeRandomFile(b *testing.B, path string, size int64) (file, uncompressed digest.Digest) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fileHash, rawHash := sha256.New(), sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(f, fileHash), gzip.BestSpeed)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(io.MultiWriter(zw, rawHash), rand.New(rand.NewSource(time.Now().UnixNano())), size); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return digest.NewDigest(digest.SHA256, fileHash), digest.NewDigest(digest.SHA256, rawHash)
}

// writeOneLayerLayout writes an OCI layout holding one image (tag "bench")
// whose one gzip layer is the payload file.
func writeOneLayerLayout(b *testing.B, dir, payload string, layer, diffID digest.Digest, size int64) {
	b.Helper()
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.Link(payload, filepath.Join(blobs, layer.Encoded())); err != nil {
		b.Fatal(err)
	}
	put := func(v any) imgspecv1.Descriptor {
		raw, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		d := digest.FromBytes(raw)
		if err := os.WriteFile(filepath.Join(blobs, d.Encoded()), raw, 0o644); err != nil {
			b.Fatal(err)
		}
		return imgspecv1.Descriptor{Digest: d, Size: int64(len(raw))}
	}
	config := put(imgspecv1.Image{
		Platform: imgspecv1.Platform{OS: "linux", Architecture: hostArch()},
		RootFS:   imgspecv1.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
	})
	config.MediaType = imgspecv1.MediaTypeImageConfig
	manifest := put(imgspecv1.Manifest{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: imgspecv1.MediaTypeImageManifest,
		Config:    config,
		Layers:    []imgspecv1.Descriptor{{MediaType: imgspecv1.MediaTypeImageLayerGzip, Digest: layer, Size: size}},
	})
	manifest.MediaType = imgspecv1.MediaTypeImageManifest
	manifest.Annotations = map[string]string{imgspecv1.AnnotationRefName: "bench"}
	index, _ := json.Marshal(imgspecv1.Index{Versioned: imgspec.Versioned{SchemaVersion: 2}, Manifests: []imgspecv1.Descriptor{manifest}})
	layoutFile, _ := json.Marshal(imgspecv1.ImageLayout{Version: imgspecv1.ImageLayoutVersion})
	for name, data := range map[string][]byte{"index.json": index, "oci-layout": layoutFile} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func benchCall(b *testing.B, e *testEngine, method, path string, want int) {
	b.Helper()
	req, err := http.NewRequest(method, e.Base()+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, body)
	}
}

func runSkopeo(b *testing.B, skopeo string, args ...string) {
	b.Helper()
	if out, err := exec.CommandContext(withTimeout(b, 5*time.Minute), skopeo, args...).CombinedOutput(); err != nil {
		b.Fatalf("skopeo %v: %v\n%s", args, err, out)
	}
}
