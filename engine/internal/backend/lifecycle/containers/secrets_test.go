package containers_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// secretID creates a secret through the API and returns its ID.
func (te *testEngine) secret(name, data string) string {
	te.T.Helper()
	var out struct{ ID string }
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/secrets/create?name="+name, strings.NewReader(data)), &out)
	if out.ID == "" {
		te.T.Fatalf("secret %s: no ID", name)
	}
	return out.ID
}

// TestSecretsInContainers: a container gets secrets as read-only files
// (default /run/secrets/NAME, or a target with its owner and mode) and as
// environment variables; the data shows in neither the container's inspect
// nor the secret's without showsecret; a secret in use cannot be removed.
func TestSecretsInContainers(t *testing.T) {
	te := startEngine(t)
	te.secret("s1", "hunter2")
	te.secret("s2", "tok-en")
	code, lines := te.run(map[string]any{
		"command": []string{"sh", "-c", `cat /run/secrets/s1; echo; stat -c '%u:%g:%a' /run/secrets/s1 /tmp/x; cat /tmp/x; echo; echo "$TOKEN"; (echo ro >> /run/secrets/s1) 2>/dev/null || echo refused`},
		"secrets": []map[string]any{
			{"Source": "s1", "Target": "", "UID": 0, "GID": 0, "Mode": 292},
			{"Source": "s1", "Target": "/tmp/x", "UID": 5, "GID": 6, "Mode": 256},
		},
		"secret_env": map[string]string{"TOKEN": "s2"},
	})
	var out []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	want := []string{"hunter2", "0:0:444", "5:6:400", "hunter2", "tok-en", "refused"}
	if code != 0 || len(out) < len(want) {
		t.Fatalf("exit %d, output %q", code, out)
	}
	for i, w := range want {
		if !strings.Contains(out[i], w) {
			t.Fatalf("line %d: %q, want %q (all: %q)", i, out[i], w, out)
		}
	}

	id := te.create(map[string]any{"command": []string{"true"}, "secret_env": map[string]string{"TOKEN": "s2"}, "secrets": []map[string]any{{"Source": "s1"}}})
	raw := te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil)
	if bytes.Contains(raw, []byte("tok-en")) || bytes.Contains(raw, []byte("hunter2")) {
		t.Fatalf("container inspect shows secret data: %s", raw)
	}
	for _, name := range []string{"s1", "s2"} {
		status, body := te.Do("DELETE", "/secrets/"+name, nil)
		if status != http.StatusConflict || !strings.Contains(string(body), id[:12]) {
			t.Fatalf("remove %s in use: %d %s", name, status, body)
		}
	}
	if status, _ := te.Do("DELETE", "/secrets/x?all=true", nil); status != http.StatusConflict {
		t.Fatalf("remove all with secrets in use: %d", status)
	}
	if raw := te.Must(http.StatusOK, "GET", "/secrets/s2/json", nil); bytes.Contains(raw, []byte("tok-en")) {
		t.Fatalf("secret inspect without showsecret: %s", raw)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	te.Must(http.StatusNoContent, "DELETE", "/secrets/s1", nil)

	status, body := te.Do("POST", "/containers/create", map[string]any{"image": "busybox", "secrets": []map[string]any{{"Source": "nope"}}})
	if status != http.StatusNotFound || !strings.Contains(string(body), "secrets[0]") {
		t.Fatalf("create with an unknown secret: %d %s", status, body)
	}
	status, body = te.Do("POST", "/containers/create", map[string]any{"image": "busybox", "secret_env": map[string]string{"A": "nope"}})
	if status != http.StatusNotFound || !strings.Contains(string(body), "secret_env.A") {
		t.Fatalf("create with an unknown env secret: %d %s", status, body)
	}
}

// TestSecretsAPIErrors: the 4xx answers of the secret routes, each with the
// JSON error body; no error carries the secret's data.
func TestSecretsAPIErrors(t *testing.T) {
	te := startEngine(t)
	te.secret("taken", "first-data")
	for _, tc := range []struct {
		method, path, body string
		status             int
		mention            string
	}{
		{"POST", "/secrets/create", "x", 400, "name"},
		{"POST", "/secrets/create?name=-x", "x", 400, "name"},
		{"POST", "/secrets/create?name=a", "", 400, "body"},
		{"POST", "/secrets/create?name=a&labels=notjson", "x", 400, "labels"},
		{"POST", "/secrets/create?name=a&driveropts=%7B%22path%22%3A%22%2Ftmp%22%7D", "x", 400, "driveropts"},
		{"POST", "/secrets/create?name=a&driver=pass", "x", 400, "driver"},
		{"POST", "/secrets/create?name=a&replace=maybe", "x", 400, "replace"},
		{"POST", "/secrets/create?name=taken", "second-data", 409, "taken"},
		{"GET", "/secrets/json?filters=%7B%22colour%22%3A%5B%22red%22%5D%7D", "", 400, "filters"},
		{"GET", "/secrets/json?filters=nope", "", 400, "filters"},
		{"GET", "/secrets/nope/json", "", 404, "nope"},
		{"GET", "/secrets/taken/json?showsecret=maybe", "", 400, "showsecret"},
		{"GET", "/secrets/nope/exists", "", 404, "nope"},
		{"DELETE", "/secrets/nope", "", 404, "nope"},
		{"DELETE", "/secrets/taken?all=maybe", "", 400, "all"},
	} {
		status, body := te.Do(tc.method, tc.path, strings.NewReader(tc.body))
		var e struct {
			Cause, Message string
			Response       int
		}
		if status != tc.status || json.Unmarshal(body, &e) != nil || e.Response != tc.status || !strings.Contains(e.Message, tc.mention) {
			t.Errorf("%s %s: %d %s, want %d mentioning %q", tc.method, tc.path, status, body, tc.status, tc.mention)
		}
		if bytes.Contains(body, []byte("second-data")) || bytes.Contains(body, []byte("first-data")) {
			t.Errorf("%s %s: the error carries secret data: %s", tc.method, tc.path, body)
		}
	}
	big := strings.Repeat("x", 512000)
	if status, _ := te.Do("POST", "/secrets/create?name=big", strings.NewReader(big)); status != http.StatusBadRequest {
		t.Fatalf("secret of 512000 bytes: %d", status)
	}
	te.Must(http.StatusNoContent, "GET", "/secrets/taken/exists", nil)
	var listed []json.RawMessage
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/secrets/json", nil), &listed)
	if len(listed) != 1 {
		t.Fatalf("secrets after refused creates: %s", listed)
	}
}

// TestPodmanRemoteSecrets drives the secret commands of podman 4.3.1 and
// run --secret (file and env) against the engine.
func TestPodmanRemoteSecrets(t *testing.T) {
	te := startEngine(t)
	podman := podmanRemote(t, te)
	must := mustSucceed(t, podman)
	file := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(file, []byte("hunter2"), 0o600)
	id1 := strings.TrimSpace(must("secret", "create", "--label", "app=web", "s1", file))
	must("secret", "create", "s2", file)
	if _, err := podman("secret", "create", "s1", file); err == nil || !strings.Contains(err.Error(), "secret name in use") {
		t.Fatalf("secret create of a taken name: %v", err)
	}
	if got := strings.Fields(must("secret", "ls", "--format", "{{.Name}}", "--filter", "name=s1", "--filter", "name=s2")); strings.Join(got, ",") != "s1,s2" {
		t.Fatalf("secret ls with two names: %q", got)
	}
	if got := strings.Fields(must("secret", "ls", "--format", "{{.ID}}", "--filter", "label=app=web")); len(got) != 1 || got[0] != id1 {
		t.Fatalf("secret ls --filter label: %q", got)
	}
	var insp []struct {
		ID   string
		Spec struct {
			Name   string
			Driver struct{ Name string }
			Labels map[string]string
		}
	}
	out := must("secret", "inspect", "s1")
	if err := json.Unmarshal([]byte(out), &insp); err != nil || len(insp) != 1 || insp[0].ID != id1 || insp[0].Spec.Driver.Name != "file" || insp[0].Spec.Labels["app"] != "web" {
		t.Fatalf("secret inspect: %s %v", out, err)
	}
	if strings.Contains(out, "hunter2") {
		t.Fatalf("secret inspect shows the data: %s", out)
	}
	got := must("run", "--rm", "--secret", "s1", "--secret", "s2,type=env,target=TOKEN", "--secret", "s1,target=/tmp/pw,uid=7,mode=0400",
		"busybox", "sh", "-c", `cat /run/secrets/s1; echo; echo "$TOKEN"; stat -c %u:%a /tmp/pw`)
	if strings.Fields(got)[0] != "hunter2" || strings.Fields(got)[1] != "hunter2" || strings.Fields(got)[2] != "7:400" {
		t.Fatalf("run --secret: %q", got)
	}
	must("create", "--name", "user", "--secret", "s2", "busybox", "true")
	if _, err := podman("secret", "rm", "s2"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("secret rm of a secret in use: %v", err)
	}
	must("rm", "user")
	must("secret", "rm", "s1")
	must("secret", "rm", "--all")
	if got := strings.TrimSpace(must("secret", "ls", "-q")); got != "" {
		t.Fatalf("secrets after rm --all: %q", got)
	}
	// Podman 4 clients cannot decode secret events (the engine leaves them
	// out of their streams); a newer API version gets them.
	status, body := enginetest.Do(t, te.Client, "GET", strings.Replace(te.URL, "/v4.3.1/", "/v5.0.0/", 1),
		`/events?stream=false&filters={"type":["secret"]}`, nil)
	var actions []string
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var ev struct {
			Action string
			Actor  struct{ ID string }
		}
		if json.Unmarshal([]byte(line), &ev) == nil {
			actions = append(actions, ev.Action)
		}
	}
	if status != http.StatusOK || strings.Join(actions, ",") != "create,create,remove,remove" || strings.Contains(string(body), "hunter2") {
		t.Fatalf("secret events: %d %s", status, body)
	}
}

// TestSecretsSurviveKill kills the engine with SIGKILL while clients create
// and remove secrets, restarts it, and checks that every listed secret has
// exactly the data that was sent for it, that no data file is left without
// a secret, and that a container using a secret still gets it.
func TestSecretsSurviveKill(t *testing.T) {
	p, te := startEngineProcess(t)
	te.Client = &http.Client{Timeout: 10 * time.Second}
	te.loadBusybox()
	te.secret("kept", "kept-data")
	user := te.create(map[string]any{"name": "user", "command": []string{"cat", "/run/secrets/kept"}})
	_ = user
	te.Must(http.StatusOK, "DELETE", "/containers/user", nil)
	user = te.create(map[string]any{"name": "user", "command": []string{"cat", "/run/secrets/kept"}, "secrets": []map[string]any{{"Source": "kept"}}})

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			client := &http.Client{Timeout: 5 * time.Second}
			for i := 0; i < 500; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := "w" + string(rune('a'+w)) + strings.Repeat("x", i%5) + string(rune('0'+i%10))
				req, _ := http.NewRequest("POST", te.URL+"/secrets/create?replace=true&name="+name, strings.NewReader("data-of-"+name))
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
				if i%3 == 0 {
					req, _ = http.NewRequest("DELETE", te.URL+"/secrets/"+name, nil)
					if resp, err := client.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			}
		}(w)
	}
	time.Sleep(700 * time.Millisecond)
	p.Kill9()
	close(stop)
	wg.Wait()
	p.Start()

	var listed []struct {
		ID   string
		Spec struct{ Name string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/secrets/json", nil), &listed)
	if len(listed) < 2 {
		t.Fatalf("secrets after the kill: %d", len(listed))
	}
	files := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(p.Root, "secrets"))
	for _, e := range entries {
		files[e.Name()] = true
	}
	for _, s := range listed {
		var full struct{ SecretData string }
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/secrets/"+s.ID+"/json?showsecret=true", nil), &full)
		want := "data-of-" + s.Spec.Name
		if s.Spec.Name == "kept" {
			want = "kept-data"
		}
		if full.SecretData != want {
			t.Errorf("secret %s: data %q, want %q", s.Spec.Name, full.SecretData, want)
		}
		delete(files, s.ID)
	}
	if len(files) != 0 {
		t.Fatalf("data files without a secret after restart: %v", files)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/user/start", nil)
	if code := te.wait(user); code != 0 {
		t.Fatalf("user exit %d", code)
	}
	if lines := te.LogLines(user); len(lines) != 1 || !strings.Contains(lines[0], "kept-data") {
		t.Fatalf("user's log: %q", lines)
	}
	if status, _ := te.Do("DELETE", "/secrets/kept", nil); status != http.StatusConflict {
		t.Fatalf("remove a secret in use after restart: %d", status)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/user", nil)
	te.Must(http.StatusNoContent, "DELETE", "/secrets/x?all=true", nil)
	if entries, _ := os.ReadDir(filepath.Join(p.Root, "secrets")); len(entries) != 0 {
		t.Fatalf("files after removing every secret: %v", entries)
	}
	p.Stop()
}
