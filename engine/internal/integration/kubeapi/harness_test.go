// Package kubeapi tests kube play and kube down end to end: an engine on a
// loopback listener with real runc containers and netavark networks, the
// podman 4.3.1 client, and the HTTP routes.
package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine talks to an engine serving on a loopback listener.
type testEngine struct{ *enginetest.Engine }

// kubeOptions are the engine options of the kube tests: networks unique to
// the test, catatonit for the pods' infra containers.
func kubeOptions() enginetest.Options {
	return enginetest.Options{What: "kube play tests", Bridged: true,
		Needs: []string{enginetest.Catatonit, enginetest.Netavark, enginetest.AardvarkDNS}}
}

// startEngine serves an engine whose networks are unique to the test.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, kubeOptions())}
}

type podListEntry struct {
	ID     string `json:"Id"`
	Name   string
	Status string
}

func (te *testEngine) pods() []podListEntry {
	var pods []podListEntry
	status, body := te.Do("GET", "/pods/json", nil)
	if status == http.StatusOK {
		json.Unmarshal(body, &pods)
	}
	return pods
}

// names lists the names of the objects a list route answers.
func (te *testEngine) names(path, field string) []string {
	te.T.Helper()
	var list []map[string]any
	te.Get(path, &list)
	var out []string
	for _, e := range list {
		switch v := e[field].(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, n := range v {
				out = append(out, fmt.Sprint(n))
			}
		case map[string]any:
			out = append(out, fmt.Sprint(v["Name"]))
		}
	}
	return out
}

// playWithPodman starts an engine for a test that also drives the podman
// client, and plays yaml on it.
func playWithPodman(t *testing.T, yaml string) *testEngine {
	t.Helper()
	enginetest.RequirePodman(t)
	te := startEngine(t)
	te.play("", yaml)
	return te
}

// refusedPlay is a YAML that kube play must refuse, naming field.
type refusedPlay struct{ field, yaml string }

// expectRefused plays each YAML, wanting the answer to be one of statuses
// with a body naming the play's field, and no pod left after them all.
func (te *testEngine) expectRefused(plays []refusedPlay, statuses ...int) {
	te.T.Helper()
	for _, p := range plays {
		status, body := te.Do("POST", "/kube/play", strings.NewReader(p.yaml))
		if !slices.Contains(statuses, status) || !strings.Contains(string(body), p.field) {
			te.T.Errorf("play refused for %s: %d %s, want one of %v", p.field, status, body, statuses)
		}
	}
	if pods := te.pods(); len(pods) != 0 {
		te.T.Fatalf("pods left after the refused plays: %+v", pods)
	}
}

// writeFile writes a file into the test's directory and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
