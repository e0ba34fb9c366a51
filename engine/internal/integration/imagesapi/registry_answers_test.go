package imagesapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// streamObjects decodes a JSON-lines body.
func streamObjects(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("stream line %q: %v", sc.Bytes(), err)
		}
		out = append(out, line)
	}
	return out
}

// TestPodmanRemoteRegistryAnswers: what podman 4.3.1 and curl get back from
// pushes and pulls against a real plain-HTTP registry. Without
// tlsVerify=false the push (quiet or streaming) and the pull fail with a
// 400 naming the TLS problem (no fallback to HTTP); with it the push stream of a 5.x path ends
// with the pushed manifest's digest (4.x paths leave it out: podman 4.3.1
// refuses any other line than stream and error); a missing tag is a 404
// whose cause is the registry's "manifest unknown"; pullProgress streams
// Podman 6's per-blob lines; local load of a missing path is a 404.
func TestPodmanRemoteRegistryAnswers(t *testing.T) {
	e, p, reg := startWithRegistry(t, "localhost/regans:1")
	dest := reg.Host + "/answers/app:1"

	_, stderr, err := p.try("push", "localhost/regans:1", dest)
	if err == nil || !strings.Contains(stderr, "server gave HTTP response to HTTPS client") {
		t.Errorf("podman push to a plain-HTTP registry without --tls-verify=false: %v %s", err, stderr)
	}
	pushPath := "/v4.3.1/libpod/images/localhost%2Fregans:1/push?destination=" + url.QueryEscape(dest)
	tlsErr := e.do(http.MethodPost, pushPath, nil).engineError(t, http.StatusBadRequest)
	if !strings.Contains(tlsErr.Cause, "HTTP response to HTTPS client") || !strings.Contains(tlsErr.Message, "tlsVerify") {
		t.Errorf("push without tlsVerify=false: %+v", tlsErr)
	}
	// The streaming form (what podman sends) holds its lines until a blob
	// moves, so the refusal has its status too.
	tlsErr = e.do(http.MethodPost, pushPath+"&quiet=false", nil).engineError(t, http.StatusBadRequest)
	if !strings.Contains(tlsErr.Cause, "HTTP response to HTTPS client") {
		t.Errorf("streaming push without tlsVerify=false: %+v", tlsErr)
	}

	p.run("push", "--tls-verify=false", "localhost/regans:1", dest)
	lines := streamObjects(t, e.do(http.MethodPost, strings.Replace(pushPath, "/v4.3.1/", "/v5.0.0/", 1)+"&tlsVerify=false&quiet=false", nil).expect(t, http.StatusOK).body)
	want := "sha256:" + sha256Hex(skopeoRaw(t, dest))
	if len(lines) < 2 || lines[len(lines)-1]["manifestdigest"] != want {
		t.Errorf("push stream on a 5.x path does not end with manifestdigest %s: %v", want, lines)
	}
	for _, l := range streamObjects(t, e.do(http.MethodPost, pushPath+"&tlsVerify=false&quiet=false", nil).expect(t, http.StatusOK).body) {
		if _, has := l["manifestdigest"]; has {
			t.Errorf("push stream on a 4.x path carries %v", l)
		}
	}

	pullPath := "/v4.3.1/libpod/images/pull?reference="
	tlsErr = e.do(http.MethodPost, pullPath+url.QueryEscape(dest), nil).engineError(t, http.StatusBadRequest)
	if !strings.Contains(tlsErr.Cause, "HTTP response to HTTPS client") {
		t.Errorf("pull without tlsVerify=false: %+v", tlsErr)
	}
	missing := reg.Host + "/answers/app:nosuchtag"
	unknown := e.do(http.MethodPost, pullPath+url.QueryEscape(missing)+"&tlsVerify=false", nil).engineError(t, http.StatusNotFound)
	if unknown.Cause != "manifest unknown" || !strings.Contains(unknown.Message, "nosuchtag") {
		t.Errorf("pull of a missing tag: cause %q, message %q", unknown.Cause, unknown.Message)
	}
	if _, stderr, err := p.try("pull", "--tls-verify=false", missing); err == nil || !strings.Contains(stderr, "manifest unknown") {
		t.Errorf("podman pull of a missing tag: %v %s", err, stderr)
	}

	// pullProgress: every line has a status; blob lines Podman 6's words.
	e.do(http.MethodDelete, "/v4.3.1/libpod/images/localhost%2Fregans:1?force=true", nil).expect(t, http.StatusOK)
	lines = streamObjects(t, e.do(http.MethodPost, "/v5.0.0/libpod/images/pull?pullProgress=true&tlsVerify=false&reference="+url.QueryEscape(dest), nil).expect(t, http.StatusOK).body)
	pulled := 0
	for _, l := range lines[:len(lines)-1] {
		if pp, ok := l["pullProgress"].(map[string]any); ok && l["stream"] == "Artifact pulled successfully" && pp["status"] == "success" {
			pulled++
		}
	}
	if last := lines[len(lines)-1]; pulled < 2 || last["status"] != "success" || last["id"] == nil {
		t.Errorf("pullProgress stream (%d blobs pulled): %v", pulled, lines)
	}

	missingFile := filepath.Join(t.TempDir(), "missing.tar")
	gone := e.do(http.MethodPost, "/v5.0.0/libpod/local/images/load?path="+url.QueryEscape(missingFile), nil).engineError(t, http.StatusNotFound)
	if !strings.Contains(gone.Message, "file does not exist") {
		t.Errorf("local load of a missing file: %+v", gone)
	}
	e.do(http.MethodPost, "/v5.0.0/libpod/local/images/load?path=relative.tar", nil).engineError(t, http.StatusBadRequest)
}
