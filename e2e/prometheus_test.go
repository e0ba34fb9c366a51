package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berth-project/berth/shared/testnet"
)

// prometheusBinary is Debian's Prometheus server (package prometheus).
const prometheusBinary = "/usr/bin/prometheus"

// TestPrometheusScrapesBothServices: a real Prometheus on loopback scrapes
// both containers' /metrics through their mapped ports, and the test reads
// the services' own metrics back from its query API.
func TestPrometheusScrapesBothServices(t *testing.T) {
	if _, err := os.Stat(prometheusBinary); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatalf("%s not found (package prometheus): %v", prometheusBinary, err)
		}
		t.Skipf("%s not found (package prometheus)", prometheusBinary)
	}
	ctx := context.Background()
	s := startStack(t, ctx)

	// Traffic for the request counters: a finished upload with one error.
	id := s.createUpload(map[string][]byte{"junk.txt": []byte("junk\n")})
	s.markForProcessing(id)
	s.waitFor(id, time.Minute, "status done", func(u upload) bool { return u.Status == "done" })
	s.callEngine(http.MethodGet, "/v4.0.0/libpod/images/json")

	promURL := startPrometheus(t, map[string]string{
		"berth-engine":  hostPort(t, s.engine, enginePort),
		"berth-uploads": hostPort(t, s.uploads, uploadsPort),
	})

	// Both targets up.
	waitForQuery(t, promURL, `sum(up{job=~"berth-engine|berth-uploads"})`, func(v float64) bool { return v == 2 })
	// The engine's request counter saw the images/json request.
	waitForQuery(t, promURL, `sum(berth_engine_http_requests_total{method="GET"})`, func(v float64) bool { return v >= 1 })
	// The uploads service counted its create (201) and knows the done upload.
	waitForQuery(t, promURL, `sum(berth_uploads_http_requests_total{method="POST",code="201"})`, func(v float64) bool { return v >= 1 })
	// Processing metrics: the finished upload by state, and one processing run timed.
	waitForQuery(t, promURL, `sum(berth_uploads_uploads_in_state{state="done"})`, func(v float64) bool { return v >= 1 })
	waitForQuery(t, promURL, `sum(berth_uploads_processing_duration_seconds_count)`, func(v float64) bool { return v >= 1 })
}

// startPrometheus runs Prometheus on a free loopback port with a generated
// configuration scraping targets (job name -> host:port) every second, and
// returns its base URL.
func startPrometheus(t *testing.T, targets map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	config := "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
	for job, target := range targets {
		config += fmt.Sprintf("  - job_name: %q\n    static_configs:\n      - targets: [%q]\n", job, target)
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testnet.FreeAddr(t)

	output := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(output)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prometheusBinary,
		"--config.file="+configPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			if data, err := os.ReadFile(output); err == nil {
				t.Logf("---- prometheus log ----\n%s", data)
			}
		}
	})
	base := "http://" + addr
	testnet.StartServer(t, "prometheus", cmd, 20*time.Second, false).WaitReady(t, base+"/-/ready", 30*time.Second, nil)
	return base
}

// waitForQuery evaluates an instant query until its single value satisfies
// ok, failing after 30s.
func waitForQuery(t *testing.T, promURL, query string, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := "no result"
	for {
		status, body := call(t, http.MethodGet, promURL+"/api/v1/query?query="+url.QueryEscape(query), "", nil)
		if status == http.StatusOK {
			var resp struct {
				Status string `json:"status"`
				Data   struct {
					Result []struct {
						Value [2]any `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &resp); err == nil && resp.Status == "success" && len(resp.Data.Result) == 1 {
				if text, isString := resp.Data.Result[0].Value[1].(string); isString {
					if v, err := strconv.ParseFloat(text, 64); err == nil {
						if ok(v) {
							return
						}
						last = text
					}
				}
			} else {
				last = string(body)
			}
		} else {
			last = fmt.Sprintf("%d %s", status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus query %s: condition not met within 30s; last result %s", query, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
