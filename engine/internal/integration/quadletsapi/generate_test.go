package quadletsapi

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// podmanIn runs the podman 4.3.1 client against the engine in dir.
func (te *testEngine) podmanIn(dir string, args ...string) string {
	te.T.Helper()
	enginetest.Require(te.T, "podman client tests", "podman")
	cmd := te.PodmanCommand(args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		te.T.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// verifyUnits runs systemd-analyze verify on the unit files in dir (it
// works without a running systemd).
func verifyUnits(t *testing.T, dir string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("systemd-analyze is not installed (BERTH_TEST_STRICT=1)")
		}
		t.Skip("systemd-analyze is not installed")
	}
	units, _ := filepath.Glob(filepath.Join(dir, "*.service"))
	if len(units) == 0 {
		t.Fatalf("no units in %s", dir)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func readUnit(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestPodmanGenerateSystemd: podman 4.3.1's generate systemd (--name,
// --new, --restart-policy, a pod) gets units that systemd-analyze accepts
// and that drive this engine; bad parameters are refused.
func TestPodmanGenerateSystemd(t *testing.T) {
	te := startEngine(t)
	host := strings.TrimPrefix(strings.SplitN(te.URL, "/v4", 2)[0], "http://")
	client := "/usr/bin/podman --url tcp://" + host

	dir := t.TempDir()
	te.podmanIn(dir, "create", "--name", "web", "localhost/busybox", "sleep", "1000")
	te.podmanIn(dir, "generate", "systemd", "--name", "--files", "web")
	unit := readUnit(t, filepath.Join(dir, "container-web.service"))
	for _, want := range []string{"ExecStart=" + client + " start web\n", "ExecStop=" + client + " stop -t 10 web\n",
		"Type=forking\n", "Restart=on-failure\n", "TimeoutStopSec=70\n", "PIDFile=/", "WantedBy=default.target\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	verifyUnits(t, dir)

	newDir := t.TempDir()
	te.podmanIn(newDir, "generate", "systemd", "--name", "--new", "--restart-policy", "on-abnormal", "--restart-sec", "5", "--files", "web")
	unit = readUnit(t, filepath.Join(newDir, "container-web.service"))
	for _, want := range []string{
		"ExecStart=" + client + " run --cidfile=%t/%n.ctr-id --rm -d --replace --name web localhost/busybox sleep 1000\n",
		"ExecStopPost=" + client + " rm -f --ignore -t 10 --cidfile=%t/%n.ctr-id\n",
		"Restart=on-abnormal\n", "RestartSec=5\n", "Type=oneshot\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("--new unit lacks %q:\n%s", want, unit)
		}
	}
	verifyUnits(t, newDir)

	podDir := t.TempDir()
	te.podmanIn(podDir, "pod", "create", "--name", "app")
	te.podmanIn(podDir, "create", "--pod", "app", "--name", "app-db", "localhost/busybox", "sleep", "1000")
	te.podmanIn(podDir, "generate", "systemd", "--name", "--files", "app")
	podUnit := readUnit(t, filepath.Join(podDir, "pod-app.service"))
	member := readUnit(t, filepath.Join(podDir, "container-app-db.service"))
	if !strings.Contains(podUnit, "Requires=container-app-db.service\n") || !strings.Contains(member, "BindsTo=pod-app.service\n") {
		t.Errorf("pod units not bound:\n%s\n%s", podUnit, member)
	}
	verifyUnits(t, podDir)

	var units map[string]string
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/generate/web/systemd?useName=true&noHeader=true&wants=a.service&after=b.service&requires=c.service&additionalEnvVariables=FOO=bar&startTimeout=30&stopTimeout=5&containerPrefix=ctr&separator=_", nil), &units)
	got := units["ctr_web"]
	for _, want := range []string{"Wants=a.service\n", "After=b.service\n", "Requires=c.service\n", "Environment=FOO=bar\n", "TimeoutStartSec=30\n", "TimeoutStopSec=65\n", "stop -t 5 web"} {
		if !strings.Contains(got, want) {
			t.Errorf("unit lacks %q:\n%s", want, got)
		}
	}
	if strings.HasPrefix(got, "#") {
		t.Errorf("noHeader kept the header:\n%s", got)
	}
	te.mustFail(http.StatusNotFound, "GET", "/generate/nope/systemd", nil, "nope")
	te.mustFail(http.StatusBadRequest, "GET", "/generate/web/systemd?restartPolicy=sometimes", nil, "restartPolicy")
	te.mustFail(http.StatusBadRequest, "GET", "/generate/web/systemd?new=true&restartPolicy=always", nil, "restartPolicy")
	te.mustFail(http.StatusBadRequest, "GET", "/generate/web/systemd?templateUnitFile=true", nil, "templateUnitFile")
	te.mustFail(http.StatusBadRequest, "GET", "/generate/web/systemd?additionalEnvVariables=novalue", nil, "additionalEnvVariables")
	te.mustFail(http.StatusBadRequest, "GET", "/generate/app/systemd?new=true", nil, "new")
}
