package dockercli

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestImageSearch: docker search and podman --remote search against a
// local registry (its v2 catalog), by a term naming the registry and by a
// bare term through the engine's unqualified-search registries; filters,
// --list-tags and the refusals of a bad filter and limit.
func TestImageSearch(t *testing.T) {
	regDir := t.TempDir()
	port := startRegistry(t, regDir)
	reg := "localhost:" + port
	te := startEngineWith(t, func(e *enginetest.Engine, cfg *engine.Config) {
		conf := filepath.Join(e.Dir, "registries.conf")
		content := fmt.Sprintf("unqualified-search-registries = [%q]\nshort-name-mode = \"permissive\"\n[[registry]]\nlocation = %q\ninsecure = true\n", reg, reg)
		if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.RegistriesConf = conf
	})
	te.run("docker", "tag", "localhost/busybox:latest", reg+"/busybox:1")
	te.run("docker", "push", reg+"/busybox:1")
	te.run("docker", "tag", "localhost/busybox:latest", reg+"/other/tool:2")
	te.run("docker", "push", reg+"/other/tool:2")

	// docker: a loopback registry is searched without TLS verification,
	// as dockerd's default insecure registries are.
	out := te.run("docker", "search", "--format", "{{.Name}}|{{.StarCount}}|{{.IsOfficial}}", reg+"/busybox")
	if strings.TrimSpace(out) != reg+"/busybox|0|" {
		t.Fatalf("docker search %s/busybox: %q", reg, out)
	}
	if out := te.run("docker", "search", "--filter", "stars=1", reg+"/busybox"); strings.Contains(out, "busybox") {
		t.Fatalf("docker search --filter stars=1 kept a result without stars: %q", out)
	}
	if out := te.run("docker", "search", "--filter", "is-official=false", "--limit", "1", reg+"/other"); !strings.Contains(out, reg+"/other/tool") || strings.Contains(out, "busybox") {
		t.Fatalf("docker search %s/other: %q", reg, out)
	}
	contains(t, "docker search with a bad filter", te.fails("docker", "search", "--filter", "is-official=maybe", reg+"/busybox"), "is-official")
	contains(t, "docker search with an unknown filter", te.fails("docker", "search", "--filter", "color=red", reg+"/busybox"), "color")
	code, _, body := te.Exchange("GET", te.Base()+"/v1.44/images/search?term=busybox&limit=101", "", nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "limit") {
		t.Fatalf("limit=101: %d %s", code, body)
	}
	code, _, body = te.Exchange("GET", te.Base()+"/v1.44/images/search", "", nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "term") {
		t.Fatalf("no term: %d %s", code, body)
	}
	// A bare term: the engine's unqualified-search registries.
	contains(t, "docker search busybox", te.run("docker", "search", "busybox"), reg+"/busybox")

	enginetest.RequirePodman(t)
	out = te.run("podman", "search", "--format", "{{.Index}} {{.Name}}", "--tls-verify=false", reg+"/busybox")
	if strings.TrimSpace(out) != reg+" "+reg+"/busybox" {
		t.Fatalf("podman search %s/busybox: %q", reg, out)
	}
	contains(t, "podman search busybox", te.run("podman", "search", "busybox"), reg+"/busybox")
	contains(t, "podman search --list-tags", te.run("podman", "search", "--list-tags", "--tls-verify=false", reg+"/other/tool"), "2")
	contains(t, "podman search with a bad filter", te.fails("podman", "search", "--filter", "stars=many", reg+"/busybox"), "stars")
}
