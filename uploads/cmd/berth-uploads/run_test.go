package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/shared/buildinfo"
	"github.com/berth-project/berth/shared/syncbuf"
)

// start runs the service in-process and returns its base URL and a stop function that
// waits for run to return.
func start(t *testing.T, env map[string]string, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, append([]string{"berth-uploads", "--listen", "tcp://127.0.0.1:0"}, args...), func(k string) string { return env[k] }, stdout, stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, addr, ok := strings.Cut(stdout.String(), "listening on tcp://"); ok {
			return "http://" + strings.TrimSpace(addr), func() error {
				cancel()
				select {
				case err := <-errc:
					return err
				case <-time.After(10 * time.Second):
					t.Fatal("run did not return after cancel")
					return nil
				}
			}
		}
		select {
		case err := <-errc:
			t.Fatalf("run returned early: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	t.Fatalf("server did not start: %s", stderr.String())
	return "", nil
}

func call(t *testing.T, method, url, body string, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestRunProcessesAndRestarts(t *testing.T) {
	dataDir := t.TempDir()
	base, stop := start(t, nil, "--data-dir", dataDir, "--poll-interval", "20ms")
	code, body := call(t, "POST", base+"/v1/uploads", "")
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var u map[string]any
	json.Unmarshal(body, &u)
	id := u["uuid"].(string)
	if code, _ := call(t, "PUT", base+"/v1/uploads/"+id+"/files/x/y.tar", "data", "Content-Type", "application/octet-stream"); code != 204 {
		t.Fatalf("put: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("clean shutdown: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "uploads.db")); err != nil {
		t.Fatalf("default SQLite database missing: %v", err)
	}

	// A restart finds the upload and its file; processing runs to done.
	base, stop = start(t, map[string]string{"BERTH_UPLOADS_DATA_DIR": dataDir, "BERTH_UPLOADS_POLL_INTERVAL": "20ms"})
	defer stop()
	if code, body := call(t, "GET", base+"/v1/uploads/"+id+"/files/x/y.tar", "", "Accept", "application/octet-stream"); code != 200 || string(body) != "data" {
		t.Fatalf("file after restart: %d %q", code, body)
	}
	if code, _ := call(t, "POST", base+"/v1/uploads/"+id+"/markForProcessing", ""); code != 202 {
		t.Fatalf("mark: %d", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for u["status"] != "done" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		_, body := call(t, "GET", base+"/v1/uploads/"+id, "")
		json.Unmarshal(body, &u)
	}
	if u["status"] != "done" || u["errors"] != 1.0 || u["filesTotal"] != 1.0 {
		t.Fatalf("after processing: %v", u)
	}
	if code, body := call(t, "GET", base+"/readyz", ""); code != 200 || !strings.Contains(string(body), "database") {
		t.Fatalf("readyz: %d %s", code, body)
	}
}

func TestRunTokensAndLimits(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("tok\n"), 0o600)
	base, stop := start(t, map[string]string{"BERTH_UPLOADS_MAX_FILE_SIZE": "1K"}, "--data-dir", dir, "--tokens-file", tokens)
	defer stop()
	if code, _ := call(t, "POST", base+"/v1/uploads", ""); code != 401 {
		t.Fatalf("without token: %d", code)
	}
	code, body := call(t, "POST", base+"/v1/uploads", "", "Authorization", "Bearer tok")
	if code != 201 {
		t.Fatalf("with token: %d", code)
	}
	var u map[string]any
	json.Unmarshal(body, &u)
	url := base + "/v1/uploads/" + u["uuid"].(string) + "/files/f"
	if code, _ := call(t, "PUT", url, strings.Repeat("x", 1025), "Authorization", "Bearer tok", "Content-Type", "application/octet-stream"); code != 413 {
		t.Fatalf("over 1K: %d", code)
	}
	if code, _ := call(t, "PUT", url, strings.Repeat("x", 1024), "Authorization", "Bearer tok", "Content-Type", "application/octet-stream"); code != 204 {
		t.Fatalf("1K: %d", code)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	twoTokens := filepath.Join(t.TempDir(), "engine-token")
	if err := os.WriteFile(twoTokens, []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--max-file-size", "lots"},
		{"--max-files", "-1"},
		{"--shutdown-timeout", "soon"},
		{"--log-format", "xml"},
		{"--database", "mysql://db"},
		{"--tokens-file", filepath.Join(dir, "missing")},
		{"--listen", "ftp://x"},
		{"--workers", "0"},
		{"extra-arg"},
		{"--engine-ca", "ca.pem"},
		{"--engine-token-file", twoTokens},
		{"--engine-url", "https://127.0.0.1:1", "--engine-token-file", twoTokens},
		{"--engine-url", "tcp://127.0.0.1:1", "--engine-cert", "c.pem", "--engine-key", "k.pem"},
		{"--engine-url", "https://127.0.0.1:1", "--engine-cert", "c.pem"},
	} {
		err := run(context.Background(), append([]string{"berth-uploads", "--data-dir", dir}, args...), func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "100": 100, "1K": 1024, "1KiB": 1024, "2kb": 2048, "64MiB": 64 << 20, "4G": 4 << 30, "1TiB": 1 << 40, "7B": 7, " 3 M ": 3 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5G", "99999999999T", "G"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

func TestRunVersion(t *testing.T) {
	var stdout strings.Builder
	err := run(context.Background(), []string{"berth-uploads", "--version"}, func(string) string { return "" }, &stdout, io.Discard)
	want := buildinfo.Get().String("berth-uploads") + "\n"
	if err != nil || stdout.String() != want {
		t.Fatalf("--version: %q %v, want %q", stdout.String(), err, want)
	}
}
