package compatapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorWordsAsPodman: the causes and messages Podman's clients and
// users match on are Podman's, and the podman 4.3.1 client exits and
// prints as it does against Podman 4.3.1 (checked side by side with
// podman system service).
func TestErrorWordsAsPodman(t *testing.T) {
	te := startEngine(t)
	for _, tt := range []struct {
		method, path string
		body         any
		status       int
		cause        string
		message      string
	}{
		{"GET", "/images/nosuch/json", nil, 404, "image not known", "failed to find image nosuch: nosuch: image not known"},
		{"GET", "/images/nosuch/history", nil, 404, "image not known", "failed to find image nosuch: nosuch: image not known"},
		{"DELETE", "/images/nosuch", nil, 404, "image not known", "nosuch: image not known"},
		{"GET", "/images/nosuch/exists", nil, 404, "image not known", "nosuch: image not known"},
		{"GET", "/manifests/nosuch/json", nil, 404, "image not known", "image not known"},
		{"GET", "/artifacts/nosuch/json", nil, 404, "artifact does not exist", "nosuch: artifact does not exist"},
		{"GET", "/containers/nosuch/json", nil, 404, "no such container", `no container with name or ID "nosuch" found: no such container`},
		{"GET", "/containers/nosuch/exists", nil, 404, "no such container", `no container with name or ID "nosuch" found: no such container`},
		{"POST", "/containers/nosuch/start", nil, 404, "no such container", `no container with name or ID "nosuch" found: no such container`},
		{"GET", "/pods/nosuch/json", nil, 404, "no such pod", "no pod with name or ID nosuch found: no such pod"},
		{"GET", "/volumes/nosuch/json", nil, 404, "no such volume", `no volume with name "nosuch" found: no such volume`},
		{"GET", "/networks/nosuch/json", nil, 404, "network not found", "unable to find network with name or ID nosuch: network not found"},
		{"GET", "/secrets/nosuch/json", nil, 404, "no such secret", `no secret with name or id "nosuch": no such secret`},
		{"POST", "/pods/create", map[string]any{"name": "p1"}, 409, "pod already exists", `name "p1" is in use: pod already exists`},
		{"POST", "/volumes/create", map[string]any{"Name": "v1"}, 409, "volume already exists", "volume with name v1 already exists: volume already exists"},
		{"POST", "/networks/create", map[string]any{"name": "n1"}, 409, "network already exists", "network already exists"},
		{"POST", "/containers/create", map[string]any{"name": "c1", "image": "localhost/busybox:latest"}, 409, "that name is already in use", `the container name "c1" is already in use by `},
		{"POST", "/manifests/m1", map[string]any{}, 409, "that name is already in use", `image name "localhost/m1:latest" is already associated with image`},
	} {
		status, body := te.Do(tt.method, tt.path, tt.body)
		if tt.status == http.StatusConflict {
			// The first request makes the object; the second collides.
			status, body = te.Do(tt.method, tt.path, tt.body)
		}
		e := decodeError(t, body)
		if status != tt.status || e.Response != tt.status || e.Cause != tt.cause || !strings.Contains(e.Message, tt.message) {
			t.Errorf("%s %s: %d %+v; want %d, cause %q, message containing %q", tt.method, tt.path, status, e, tt.status, tt.cause, tt.message)
		}
	}
	if status, body := te.Do("DELETE", "/containers/nosuch?ignore=true", nil); status != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("removing a missing container with ignore=true: %d %s, want 200 []", status, body)
	}

	// The podman 4.3.1 client, exit status and output as against Podman 4.3.1.
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	te.MustPodman("secret", "create", "s1", secretFile)
	for _, tt := range []struct {
		code int
		want string
		args []string
	}{
		{1, "Error: nosuch: image not known", []string{"rmi", "nosuch"}},
		{1, "", []string{"image", "exists", "nosuch"}},
		{1, "", []string{"container", "exists", "nosuch"}},
		{1, "", []string{"pod", "exists", "nosuch"}},
		{1, "", []string{"volume", "exists", "nosuch"}},
		{1, "Error: nosuch: image not known", []string{"manifest", "rm", "nosuch"}},
		{125, "Error: nosuch: image not known", []string{"save", "-o", filepath.Join(t.TempDir(), "x.tar"), "nosuch"}},
		{125, "Error: failed to find image nosuch: nosuch: image not known", []string{"tag", "nosuch", "other:1"}},
		{125, "Error: failed to make pod: adding pod to state: name \"p1\" is in use: pod already exists", []string{"pod", "create", "--name", "p1"}},
		{1, `Error: no container with name or ID "nosuch" found: no such container`, []string{"rm", "nosuch"}},
		{125, `Error: no container with name or ID "nosuch" found: no such container`, []string{"stop", "nosuch"}},
		{125, `Error: unable to look up nosuch to perform a health check: no container with name or ID "nosuch" found: no such container`, []string{"healthcheck", "run", "nosuch"}},
		{1, `Error: no volume with name "nosuch" found: no such volume`, []string{"volume", "rm", "nosuch"}},
		{125, "Error: volume with name v1 already exists: volume already exists", []string{"volume", "create", "v1"}},
		{125, "network already exists", []string{"network", "create", "n1"}},
		{125, `Error: creating container storage: the container name "c1" is already in use by `, []string{"create", "--name", "c1", "localhost/busybox:latest"}},
		{125, "Error: s1: secret name in use", []string{"secret", "create", "s1", secretFile}},
	} {
		podmanFails(t, te, tt.code, tt.want, tt.args...)
	}
	if out, err := te.PodmanCommand("rm", "-i", "nosuch").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("podman rm -i nosuch: %v %q, want success and no output", err, out)
	}
	// The Docker front door words the same errors as Docker does.
	for path, want := range map[string]string{
		"/v1.44/containers/nosuch/json": `{"message":"No such container: nosuch"}`,
		"/v1.44/images/nosuch/json":     `{"message":"No such image: nosuch:latest"}`,
		"/v1.44/volumes/nosuch":         `{"message":"get nosuch: no such volume"}`,
	} {
		status, _, body := te.Exchange("GET", te.Base()+path, "", nil)
		if status != http.StatusNotFound || strings.TrimSpace(string(body)) != want {
			t.Errorf("GET %s: %d %s, want 404 %s", path, status, body, want)
		}
	}
}
