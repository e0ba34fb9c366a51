package deploy

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-project/berth/uploads/internal/processor"
)

func TestIsKubeYAML(t *testing.T) {
	for rel, want := range map[string]bool{
		"pod.yaml": true, "k8s/app.YML": true, "a.yml": true,
		".yaml": false, "pod.yaml.txt": false, "app.container": false, "yaml": false,
	} {
		if got := IsKubeYAML(rel); got != want {
			t.Errorf("IsKubeYAML(%q) = %v, want %v", rel, got, want)
		}
	}
}

// The plan deploys archives, then units by type, then YAML, then the rest, each group
// in lexical order; referenced files keep their place but deploy with their unit.
func TestPlanOrder(t *testing.T) {
	dir, files := writeUpload(t, map[string]string{
		"z/img.tar":       "x",
		"a/img.tar.gz":    "x",
		"web.container":   "[Container]\nImage=localhost/busybox:latest\nPod=app.pod\n",
		"app.pod":         "[Pod]\n",
		"net.network":     "[Network]\n",
		"data.volume":     "[Volume]\n",
		"base.image":      "[Image]\nImage=localhost/busybox:latest\n",
		"b.build":         "[Build]\nImageTag=localhost/b\nFile=Containerfile\n",
		"Containerfile":   "FROM scratch\n",
		"play.kube":       "[Kube]\nYaml=kube/play.yaml\n",
		"kube/play.yaml":  "apiVersion: v1\nkind: Pod\n",
		"standalone.yaml": "apiVersion: v1\nkind: Pod\n",
		"README.md":       "x",
	})
	p, err := New(nil, quietLogger(), nil).Plan(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a/img.tar.gz", "z/img.tar",
		"net.network", "data.volume", "base.image", "b.build", "app.pod", "web.container", "play.kube",
		"kube/play.yaml", "standalone.yaml",
		"Containerfile", "README.md",
	}
	if got := p.Files(); !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
	for _, rel := range []string{"kube/play.yaml", "Containerfile"} {
		if _, err := p.Deploy(context.Background(), rel); !errors.Is(err, processor.ErrBundled) {
			t.Errorf("Deploy(%q) = %v, want ErrBundled", rel, err)
		}
	}
	if _, err := p.Deploy(context.Background(), "README.md"); !errors.Is(err, processor.ErrUnsupported) {
		t.Errorf("Deploy(README.md) = %v, want ErrUnsupported", err)
	}
}

func TestUnitReferences(t *testing.T) {
	files := []string{
		"app/Containerfile", "app/ctx/a.txt", "app/ctx/sub/b.txt", "app/env", "app/kube.yaml",
		"app/other.container", "app/seccomp.json", "outside.yaml",
	}
	has := func(rel string) bool { return slices.Contains(files, rel) }
	tests := []struct {
		name, unit, content string
		want                []string
	}{
		{"kube yaml and configmap", "app/play.kube", "[Kube]\nYaml=kube.yaml\nConfigMap=env\n", []string{"app/env", "app/kube.yaml"}},
		{"dot slash", "app/play.kube", "[Kube]\nYaml=./kube.yaml\n", []string{"app/kube.yaml"}},
		{"environment file, optional prefix", "app/web.container", "[Container]\nImage=x\nEnvironmentFile=-env\nSeccompProfile=seccomp.json\n", []string{"app/env", "app/seccomp.json"}},
		{"build context directory", "app/b.build", "[Build]\nImageTag=x\nFile=Containerfile\nSetWorkingDirectory=ctx\n", []string{"app/Containerfile", "app/ctx/a.txt", "app/ctx/sub/b.txt"}},
		{"build context words", "app/b.build", "[Build]\nImageTag=x\nSetWorkingDirectory=unit\n", []string{}},
		{"volume bind source", "app/web.container", "[Container]\nImage=x\nVolume=./ctx:/data:ro\nVolume=named:/n\nVolume=/host:/h\n", []string{"app/ctx/a.txt", "app/ctx/sub/b.txt"}},
		{"mount source", "app/web.container", "[Container]\nImage=x\nMount=type=bind,source=./env,destination=/e\n", []string{"app/env"}},
		{"escaping the unit directory", "app/play.kube", "[Kube]\nYaml=../outside.yaml\n", []string{}},
		{"absolute", "app/play.kube", "[Kube]\nYaml=/etc/kube.yaml\n", []string{}},
		{"specifier", "app/play.kube", "[Kube]\nYaml=%h/kube.yaml\n", []string{}},
		{"missing file", "app/play.kube", "[Kube]\nYaml=nope.yaml\n", []string{}},
		{"another unit is not a file reference", "app/web.container", "[Container]\nImage=x\nEnvironmentFile=other.container\n", []string{}},
		{"systemd sections are host paths", "app/web.container", "[Container]\nImage=x\n[Service]\nEnvironmentFile=env\n", []string{}},
		{"unit that does not parse", "app/play.kube", "[Kube\nYaml=kube.yaml\n", []string{}},
		{"unit at the root", "play.kube", "[Kube]\nYaml=outside.yaml\n", []string{"outside.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unitReferences(tt.unit, []byte(tt.content), has, files)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("references = %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzUnitReferences: whatever a unit holds, its references are files of the upload,
// inside the unit's directory, never the unit itself or another unit, each once.
func FuzzUnitReferences(f *testing.F) {
	f.Add("d/u.kube", "[Kube]\nYaml=k.yaml\n")
	f.Add("d/u.container", "[Container]\nVolume=./x:/x\nMount=type=bind,src=./e\nEnvironmentFile=-e\n")
	f.Add("u.build", "[Build]\nSetWorkingDirectory=d\nFile=../d/k.yaml\n")
	f.Add("d/u.kube", "[Kube]\nYaml=../../k.yaml\n\\\n")
	files := []string{"d/e", "d/k.yaml", "d/sub/x", "d/u.kube", "d/x/y", "e", "k.yaml"}
	has := func(rel string) bool { return slices.Contains(files, rel) }
	f.Fuzz(func(t *testing.T, unitRel, content string) {
		if !fs.ValidPath(unitRel) || unitRel == "." {
			return // the processor only plans valid upload paths
		}
		refs := unitReferences(unitRel, []byte(content), has, files)
		dir := strings.TrimSuffix(unitRel, "/"+lastSegment(unitRel))
		for i, ref := range refs {
			if !has(ref) || ref == unitRel || unitExtension(ref) != "" {
				t.Fatalf("reference %q of %q is no plain file of the upload", ref, unitRel)
			}
			if dir != unitRel && !strings.HasPrefix(ref, dir+"/") {
				t.Fatalf("reference %q leaves the directory of %q", ref, unitRel)
			}
			if i > 0 && refs[i-1] >= ref {
				t.Fatalf("references not sorted and unique: %v", refs)
			}
		}
	})
}

func lastSegment(rel string) string {
	if i := strings.LastIndex(rel, "/"); i >= 0 {
		return rel[i+1:]
	}
	return rel
}

// recordingEngine is an httptest engine for quadlet installs and kube plays: it keeps
// each request and answers with the status and body set for its path.
type recordingEngine struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []recorded
	answers map[string]answer
	// refuse, when set, may answer a request instead of answers.
	refuse func(recorded) *answer
}

type recorded struct {
	path, contentType string
	query             url.Values
	body              []byte
}

type answer struct {
	status int
	body   string
}

func newRecordingEngine(t *testing.T, answers map[string]answer) *recordingEngine {
	t.Helper()
	e := &recordingEngine{answers: answers}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		path := strings.TrimPrefix(r.URL.Path, "/v4.0.0/libpod")
		e.mu.Lock()
		rec := recorded{path: path, contentType: r.Header.Get("Content-Type"), query: r.URL.Query(), body: body}
		e.reqs = append(e.reqs, rec)
		e.mu.Unlock()
		a, ok := e.answers[r.Method+" "+path]
		if e.refuse != nil {
			if refused := e.refuse(rec); refused != nil {
				a, ok = *refused, true
			}
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *recordingEngine) requests() []recorded {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reqs)
}

// tarFiles reads a tar archive into name -> content; directories map to "/".
func tarFiles(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading the archive sent: %v", err)
		}
		if hdr.Typeflag == tar.TypeDir {
			out[hdr.Name] = "/"
			continue
		}
		content, _ := io.ReadAll(tr)
		out[hdr.Name] = string(content)
	}
}

// A .kube unit goes to InstallQuadlets, replaced and activated, as a tar holding the
// unit and the YAML it names where it names it; the YAML is not played on its own.
func TestDeployUnitWithReferencedFiles(t *testing.T) {
	engine := newRecordingEngine(t, map[string]answer{
		"POST /quadlets": {200, `{"InstalledQuadlets":{"web.kube":"/root/quadlets/web/web.kube"},"QuadletErrors":{}}`},
	})
	unit := "[Kube]\nYaml=k8s/web.yaml\n"
	dir, files := writeUpload(t, map[string]string{"deploy/web.kube": unit, "deploy/k8s/web.yaml": "kind: Pod\n", "deploy/notes.txt": "x"})
	p, err := New(clientFor(t, engine.srv.URL), quietLogger(), nil).Plan(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range p.Files() {
		_, err := p.Deploy(context.Background(), rel)
		switch rel {
		case "deploy/web.kube":
			if err != nil {
				t.Fatalf("Deploy(%s) = %v", rel, err)
			}
		case "deploy/k8s/web.yaml":
			if !errors.Is(err, processor.ErrBundled) {
				t.Fatalf("Deploy(%s) = %v, want ErrBundled", rel, err)
			}
		}
	}
	reqs := engine.requests()
	if len(reqs) != 1 || reqs[0].path != "/quadlets" {
		t.Fatalf("engine requests = %+v, want one install", reqs)
	}
	r := reqs[0]
	if r.contentType != "application/x-tar" || r.query.Get("replace") != "true" || r.query.Get("activate") != "true" {
		t.Errorf("install request: content type %q, query %v", r.contentType, r.query)
	}
	want := map[string]string{"web.kube": unit, "k8s/": "/", "k8s/web.yaml": "kind: Pod\n"}
	if got := tarFiles(t, r.body); len(got) != len(want) || got["web.kube"] != unit || got["k8s/web.yaml"] != want["k8s/web.yaml"] || got["k8s/"] != "/" {
		t.Errorf("archive sent = %v, want %v", got, want)
	}
}

func TestDeployUnitRefused(t *testing.T) {
	for name, a := range map[string]answer{
		"400":                    {400, `{"cause":"unsupported key","message":"web.container line 2: [Container] key Imagee: unsupported key in a .container unit","response":400}`},
		"200 with QuadletErrors": {200, `{"InstalledQuadlets":{},"QuadletErrors":{"web.container":"web.container line 2: [Container] key Imagee: unsupported key in a .container unit"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			engine := newRecordingEngine(t, map[string]answer{"POST /quadlets": a})
			_, err := deployOne(t, New(clientFor(t, engine.srv.URL), quietLogger(), nil), "web.container", []byte("[Container]\nImagee=x\n"))
			if err == nil || errors.Is(err, processor.ErrUnavailable) || errors.Is(err, processor.ErrUnsupported) {
				t.Fatalf("err = %v, want the file's error entry", err)
			}
			if !strings.Contains(err.Error(), "line 2: [Container] key Imagee: unsupported key") || !strings.HasPrefix(err.Error(), "quadlet unit refused by the engine") {
				t.Errorf("message %q lacks the engine's", err)
			}
		})
	}
}

func TestDeployKubeYAML(t *testing.T) {
	yaml := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n"
	engine := newRecordingEngine(t, map[string]answer{
		"POST /kube/play": {200, `{"Pods":[{"ID":"abc","Containers":["def"],"InitContainers":[],"Logs":[],"ContainerErrors":[]}],"Volumes":[]}`},
	})
	names, err := deployOne(t, New(clientFor(t, engine.srv.URL), quietLogger(), nil), "k8s/web.yaml", []byte(yaml))
	if err != nil || names != nil {
		t.Fatalf("Deploy = %v, %v", names, err)
	}
	reqs := engine.requests()
	if len(reqs) != 1 || reqs[0].path != "/kube/play" || string(reqs[0].body) != yaml || reqs[0].query.Get("replace") != "true" {
		t.Fatalf("engine requests = %+v", reqs)
	}
}

func TestDeployKubeYAMLRefused(t *testing.T) {
	tests := map[string]struct {
		answer answer
		want   string
	}{
		"invalid YAML": {answer{400, `{"cause":"invalid YAML","message":"document 1: field spec.containers: required","response":400}`},
			"kube YAML refused by the engine (400): document 1: field spec.containers: required"},
		"containers that did not start": {answer{200, `{"Pods":[{"ID":"abc","Containers":["def"],"ContainerErrors":["def: exec: no such file"]}]}`},
			"kube YAML played, but containers failed to start: def: exec: no such file"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			engine := newRecordingEngine(t, map[string]answer{"POST /kube/play": tt.answer})
			_, err := deployOne(t, New(clientFor(t, engine.srv.URL), quietLogger(), nil), "web.yml", []byte("x: y\n"))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
