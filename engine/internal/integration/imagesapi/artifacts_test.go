package imagesapi

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// artifactView is an artifact as InspectArtifact answers it.
type artifactView struct {
	Name     string
	Digest   string
	Manifest struct {
		ArtifactType string `json:"artifactType"`
		Layers       []struct {
			MediaType   string            `json:"mediaType"`
			Digest      string            `json:"digest"`
			Size        int64             `json:"size"`
			Annotations map[string]string `json:"annotations"`
		} `json:"layers"`
	}
}

const titleKey = "org.opencontainers.image.title"

// addArtifact posts body as a file of an artifact.
func (e *testEngine) addArtifact(t *testing.T, query string, body []byte, want int) string {
	t.Helper()
	r := e.do(http.MethodPost, "/v5.0.0/libpod/artifacts/add?"+query, bytes.NewReader(body))
	if want != http.StatusCreated {
		r.engineError(t, want)
		return ""
	}
	var report struct{ ArtifactDigest string }
	r.expect(t, want).json(t, &report)
	if !strings.HasPrefix(report.ArtifactDigest, "sha256:") {
		t.Fatalf("add answered %s", r.body)
	}
	return report.ArtifactDigest
}

// untar reads a tar stream into name -> content, keeping the order of names.
func untar(t *testing.T, data []byte) (map[string]string, []string) {
	t.Helper()
	out := map[string]string{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, names
		}
		if err != nil {
			t.Fatalf("reading extract: %v", err)
		}
		content, _ := io.ReadAll(tr)
		out[h.Name] = string(content)
		names = append(names, h.Name)
	}
}

// TestArtifactsEndToEnd adds two files with annotations, lists, inspects,
// extracts, pushes to a real registry (skopeo reads the artifact manifest
// back), removes, pulls back and checks that artifacts are not images.
func TestArtifactsEndToEnd(t *testing.T) {
	e := startEngine(t)
	reg := registrytest.Start(t, registrytest.Options{})
	api := "/v5.0.0/libpod/artifacts"
	name := reg.Host + "/files/art:1"
	imagesBefore := len(e.list(""))

	e.addArtifact(t, "name="+url.QueryEscape(name)+"&fileName=notes.txt&annotations=team=a&annotations=env=test&artifactMIMEType=application/x-berth-test", []byte("hello artifacts\n"), http.StatusCreated)
	binary := bytes.Repeat([]byte{0, 1, 2, 250}, 4096)
	digest := e.addArtifact(t, "name="+url.QueryEscape(name)+"&fileName=data.bin&append=true", binary, http.StatusCreated)

	var listed []struct {
		Name     string
		Manifest json.RawMessage
	}
	e.do(http.MethodGet, api+"/json", nil).expect(t, http.StatusOK).json(t, &listed)
	if len(listed) != 1 || listed[0].Name != name {
		t.Fatalf("list: %+v", listed)
	}
	var a artifactView
	e.do(http.MethodGet, api+"/"+url.PathEscape(name)+"/json", nil).expect(t, http.StatusOK).json(t, &a)
	if a.Digest != digest || a.Name != name || a.Manifest.ArtifactType != "application/x-berth-test" || len(a.Manifest.Layers) != 2 {
		t.Fatalf("inspect: %+v (digest %s)", a, digest)
	}
	first, second := a.Manifest.Layers[0], a.Manifest.Layers[1]
	if first.Annotations[titleKey] != "notes.txt" || first.Annotations["team"] != "a" || first.Annotations["env"] != "test" || !strings.HasPrefix(first.MediaType, "text/plain") {
		t.Errorf("first file: %+v", first)
	}
	if second.Annotations[titleKey] != "data.bin" || second.Size != int64(len(binary)) || second.MediaType != "application/octet-stream" {
		t.Errorf("second file: %+v", second)
	}
	// Inspect by digest prefix finds the same artifact.
	e.do(http.MethodGet, api+"/"+strings.TrimPrefix(digest, "sha256:")[:12]+"/json", nil).expect(t, http.StatusOK)

	files, order := untar(t, e.do(http.MethodGet, api+"/"+url.PathEscape(name)+"/extract", nil).expect(t, http.StatusOK).body)
	if files["notes.txt"] != "hello artifacts\n" || files["data.bin"] != string(binary) || strings.Join(order, ",") != "notes.txt,data.bin" {
		t.Errorf("extract: %v", order)
	}
	one, _ := untar(t, e.do(http.MethodGet, api+"/"+url.PathEscape(name)+"/extract?title=notes.txt", nil).expect(t, http.StatusOK).body)
	if len(one) != 1 || one["notes.txt"] == "" {
		t.Errorf("extract by title: %v", one)
	}
	byDigest, _ := untar(t, e.do(http.MethodGet, api+"/"+url.PathEscape(name)+"/extract?digest="+second.Digest, nil).expect(t, http.StatusOK).body)
	if byDigest[strings.ReplaceAll(second.Digest, ":", "-")] != string(binary) {
		t.Errorf("extract by digest: %v", byDigest)
	}

	var pushed struct{ ArtifactDigest string }
	e.do(http.MethodPost, api+"/"+url.PathEscape(name)+"/push?tlsVerify=false&retry=0", nil).expect(t, http.StatusOK).json(t, &pushed)
	if pushed.ArtifactDigest != digest {
		t.Errorf("pushed %s, stored %s", pushed.ArtifactDigest, digest)
	}
	var remote struct {
		ArtifactType string `json:"artifactType"`
		Layers       []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(skopeoRaw(t, name), &remote); err != nil || remote.ArtifactType != "application/x-berth-test" || len(remote.Layers) != 2 {
		t.Fatalf("skopeo inspect --raw: %+v (%v)", remote, err)
	}

	if n := len(e.list("")); n != imagesBefore {
		t.Errorf("artifacts show in images: %d rows, %d before", n, imagesBefore)
	}
	var removed struct{ ArtifactDigests []string }
	e.do(http.MethodDelete, api+"/"+url.PathEscape(name), nil).expect(t, http.StatusOK).json(t, &removed)
	if len(removed.ArtifactDigests) != 1 || removed.ArtifactDigests[0] != digest {
		t.Errorf("remove: %+v", removed)
	}
	e.do(http.MethodGet, api+"/"+url.PathEscape(name)+"/json", nil).engineError(t, http.StatusNotFound)

	var pulled struct{ ArtifactDigest string }
	e.do(http.MethodPost, api+"/pull?tlsVerify=false&name="+url.QueryEscape(name), nil).expect(t, http.StatusOK).json(t, &pulled)
	if pulled.ArtifactDigest != digest {
		t.Errorf("pulled %s, pushed %s", pulled.ArtifactDigest, digest)
	}
	files, _ = untar(t, e.do(http.MethodGet, api+"/"+url.PathEscape(name)+"/extract", nil).expect(t, http.StatusOK).body)
	if files["data.bin"] != string(binary) {
		t.Error("the pulled artifact's file differs")
	}

	// A file on the engine host, then replace.
	local := filepath.Join(t.TempDir(), "local.txt")
	if err := os.WriteFile(local, []byte("local file"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.do(http.MethodPost, api+"/local/add?name=localart&fileName=local.txt&path="+url.QueryEscape(local), nil).expect(t, http.StatusCreated)
	e.addArtifact(t, "name=localart&fileName=other.txt&replace=true", []byte("replaced"), http.StatusCreated)
	var replaced artifactView
	e.do(http.MethodGet, api+"/localart/json", nil).expect(t, http.StatusOK).json(t, &replaced)
	if replaced.Name != "localart:latest" || len(replaced.Manifest.Layers) != 1 || replaced.Manifest.Layers[0].Annotations[titleKey] != "other.txt" {
		t.Errorf("after replace: %+v", replaced)
	}

	// Batch removal: ignore skips unknown names, all removes the rest.
	e.do(http.MethodDelete, api+"/remove?ignore=true&artifacts=nosuch&artifacts=localart", nil).expect(t, http.StatusOK)
	e.do(http.MethodDelete, api+"/remove?all=true", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, api+"/json", nil).expect(t, http.StatusOK).json(t, &listed)
	if len(listed) != 0 {
		t.Errorf("after remove all: %+v", listed)
	}
}

// TestArtifactsBadInput checks the 4xx answers of the artifact routes.
func TestArtifactsBadInput(t *testing.T) {
	e := startEngine(t)
	api := "/v5.0.0/libpod/artifacts"
	e.addArtifact(t, "name=bad&fileName=a&artifactMIMEType=type/one", []byte("a"), http.StatusCreated)
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/etc/hostname", link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, method, path string
		want               int
	}{
		{"unknown inspect", http.MethodGet, api + "/nosuch/json", http.StatusNotFound},
		{"unknown extract", http.MethodGet, api + "/nosuch/extract", http.StatusNotFound},
		{"unknown remove", http.MethodDelete, api + "/nosuch", http.StatusNotFound},
		{"unknown batch remove", http.MethodDelete, api + "/remove?artifacts=nosuch", http.StatusNotFound},
		{"unknown push", http.MethodPost, api + "/nosuch/push", http.StatusNotFound},
		{"unknown title", http.MethodGet, api + "/bad/extract?title=zzz", http.StatusNotFound},
		{"unknown digest", http.MethodGet, api + "/bad/extract?digest=sha256:" + strings.Repeat("0", 64), http.StatusNotFound},
		{"title and digest", http.MethodGet, api + "/bad/extract?title=a&digest=sha256:" + strings.Repeat("0", 64), http.StatusBadRequest},
		{"name in use", http.MethodPost, api + "/add?name=bad&fileName=b", http.StatusConflict},
		{"file name in use", http.MethodPost, api + "/add?name=bad&fileName=a&append=true", http.StatusConflict},
		{"append other type", http.MethodPost, api + "/add?name=bad&fileName=b&append=true&artifactMIMEType=type/two", http.StatusBadRequest},
		{"append to nothing", http.MethodPost, api + "/add?name=nosuch&fileName=b&append=true", http.StatusNotFound},
		{"append and replace", http.MethodPost, api + "/add?name=bad&fileName=b&append=true&replace=true", http.StatusBadRequest},
		{"no name", http.MethodPost, api + "/add?fileName=b", http.StatusBadRequest},
		{"no file name", http.MethodPost, api + "/add?name=x", http.StatusBadRequest},
		{"file name with a slash", http.MethodPost, api + "/add?name=x&fileName=../x", http.StatusBadRequest},
		{"title annotation", http.MethodPost, api + "/add?name=x&fileName=b&annotations=" + url.QueryEscape(titleKey+"=c"), http.StatusBadRequest},
		{"annotation without value", http.MethodPost, api + "/add?name=x&fileName=b&annotations=novalue", http.StatusBadRequest},
		{"invalid name", http.MethodPost, api + "/add?name=Not%20Valid&fileName=b", http.StatusBadRequest},
		{"path on the body route", http.MethodPost, api + "/add?name=x&fileName=b&path=/etc/hostname", http.StatusBadRequest},
		{"relative path", http.MethodPost, api + "/local/add?name=x&fileName=b&path=etc/hostname", http.StatusBadRequest},
		{"directory", http.MethodPost, api + "/local/add?name=x&fileName=b&path=" + url.QueryEscape(dir), http.StatusBadRequest},
		{"symbolic link", http.MethodPost, api + "/local/add?name=x&fileName=b&path=" + url.QueryEscape(link), http.StatusBadRequest},
		{"device", http.MethodPost, api + "/local/add?name=x&fileName=b&path=/dev/null", http.StatusBadRequest},
		{"missing file", http.MethodPost, api + "/local/add?name=x&fileName=b&path=" + url.QueryEscape(filepath.Join(dir, "none")), http.StatusBadRequest},
		{"batch without names", http.MethodDelete, api + "/remove", http.StatusBadRequest},
		{"batch names and all", http.MethodDelete, api + "/remove?all=true&artifacts=bad", http.StatusBadRequest},
		{"pull without name", http.MethodPost, api + "/pull", http.StatusBadRequest},
		{"bad retry", http.MethodPost, api + "/pull?name=127.0.0.1:1/x:1&retry=-1", http.StatusBadRequest},
		{"bad retry delay", http.MethodPost, api + "/pull?name=127.0.0.1:1/x:1&retryDelay=soon", http.StatusBadRequest},
		{"bad registry auth", http.MethodPost, api + "/bad/push", http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, e.Base()+c.path, strings.NewReader("body"))
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "bad registry auth" {
				req.Header.Set("X-Registry-Auth", "%%%")
			}
			resp, err := e.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			response{status: resp.StatusCode, header: resp.Header, body: data}.engineError(t, c.want)
		})
	}
}

// TestArtifactRegistryAuth pushes and pulls with credentials from
// X-Registry-Auth; without them the registry refuses.
func TestArtifactRegistryAuth(t *testing.T) {
	e := startEngine(t)
	reg := registrytest.Start(t, registrytest.Options{Username: "artuser", Password: "artpass"})
	api := "/v5.0.0/libpod/artifacts"
	name := reg.Host + "/secret/art:1"
	e.addArtifact(t, "name="+url.QueryEscape(name)+"&fileName=s.txt", []byte("secret"), http.StatusCreated)
	if r := e.do(http.MethodPost, api+"/"+url.PathEscape(name)+"/push?tlsVerify=false&retry=0", nil); r.status == http.StatusOK {
		t.Fatalf("push without credentials succeeded: %s", r.body)
	}
	auth := base64.URLEncoding.EncodeToString([]byte(`{"username":"artuser","password":"artpass"}`))
	for _, path := range []string{api + "/" + url.PathEscape(name) + "/push?tlsVerify=false", api + "/pull?tlsVerify=false&name=" + url.QueryEscape(name)} {
		req, _ := http.NewRequest(http.MethodPost, e.Base()+path, nil)
		req.Header.Set("X-Registry-Auth", auth)
		resp, err := e.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s with credentials: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestKillDuringArtifactAdd kills the engine (SIGKILL) while it receives an
// artifact file: after a restart the artifact is not there, nothing is left
// in staging or among the blobs, and the same add then succeeds.
func TestKillDuringArtifactAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	p := startProcess(t)
	addURL := p.Base() + "/v5.0.0/libpod/artifacts/add?name=kept&fileName=k.txt"
	resp, err := http.Post(addURL, "application/octet-stream", strings.NewReader("kept"))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("first add: %v %v", resp, err)
	}
	resp.Body.Close()

	staging := filepath.Join(p.Root, "artifacts-staging")
	blobs := filepath.Join(p.Root, "artifacts", "blobs", "sha256")
	blobsBefore := listDir(t, blobs)
	body, writer := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(p.Base()+"/v5.0.0/libpod/artifacts/add?name=interrupted&fileName=big.bin", "application/octet-stream", body)
		if err == nil {
			resp.Body.Close()
		}
	}()
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for i := 0; i < 8; i++ {
		if _, err := writer.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "a staging entry", func() bool { return len(listDir(t, staging)) > 0 })
	p.Kill9()
	writer.CloseWithError(errors.New("engine killed"))
	<-done
	p.Start()

	var listed []struct{ Name string }
	if err := json.Unmarshal(get(t, p.Base()+"/v5.0.0/libpod/artifacts/json", http.StatusOK), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Name != "kept:latest" {
		t.Errorf("after the kill: %+v", listed)
	}
	if left := listDir(t, staging); len(left) != 0 {
		t.Errorf("staging holds %v after restart", left)
	}
	if after := listDir(t, blobs); strings.Join(after, ",") != strings.Join(blobsBefore, ",") {
		t.Errorf("blobs %v, before the interrupted add %v", after, blobsBefore)
	}
	resp, err = http.Post(p.Base()+"/v5.0.0/libpod/artifacts/add?name=interrupted&fileName=big.bin", "application/octet-stream", bytes.NewReader(chunk))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("add after restart: %v %v", resp, err)
	}
	resp.Body.Close()
}

// listDir lists a directory's names (none when it does not exist).
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
