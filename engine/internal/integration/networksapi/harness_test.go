package networksapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// netavarkPath is where Debian installs netavark.
const netavarkPath = "/usr/lib/podman/netavark"

// requireNetworking skips (or fails under BERTH_TEST_STRICT=1) without the
// container runtime, netavark, aardvark-dns or iptables.
func requireNetworking(t testing.TB) {
	t.Helper()
	enginetest.RequireRuntime(t, "network tests")
	var missing []string
	for _, p := range []string{netavarkPath, "/usr/lib/podman/aardvark-dns"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		missing = append(missing, "iptables")
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("BERTH_TEST_STRICT") == "1" {
		t.Fatalf("network tests need %s (BERTH_TEST_STRICT=1)", strings.Join(missing, ", "))
	}
	t.Skipf("network tests need %s", strings.Join(missing, ", "))
}

// testEngine is an in-process engine with networks unique to the test.
type testEngine struct {
	t      testing.TB
	url    string
	addr   string
	nets   engine.NetworkConfig
	client *http.Client
	dir    string
	// netIDs caches network IDs by name (see dnsEntryIDs).
	netIDs map[string]string
}

// busyboxImage is the test image: busybox with the network applets and
// EXPOSE 80.
func busyboxImage() testimage.Image {
	img := testimage.Busybox("localhost/busybox:latest", "sh")
	img.Config.ExposedPorts = []string{"80/tcp"}
	var files []testimage.File
	for _, applet := range []string{"httpd", "nslookup", "ping", "ip", "ifconfig"} {
		files = append(files, testimage.File{Path: "bin/" + applet, Linkname: "busybox"})
	}
	img.Layers = []testimage.Layer{{Files: files}}
	return img
}

func startEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	requireNetworking(t)
	dir := t.TempDir()
	te := &testEngine{t: t, nets: enginetest.UniqueNetworks(t), client: &http.Client{Timeout: 2 * time.Minute}, dir: dir}
	addr, stop := enginetest.ServeConfig(t, engine.Config{
		Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Runtime: "runc", Network: te.nets,
	})
	te.addr = addr
	te.url = "http://" + addr + "/v4.3.1/libpod"
	t.Cleanup(func() {
		enginetest.RemoveAll(te.do)
		te.removeNetworks()
		stop()
		enginetest.UnmountUnder(dir, 2)
		te.assertNoLeftovers()
	})
	te.loadBusybox()
	return te
}

func (te *testEngine) loadBusybox() {
	te.t.Helper()
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, busyboxImage()); err != nil {
		te.t.Fatal(err)
	}
	te.must(http.StatusOK, "POST", "/images/load", &buf)
}

func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	return enginetest.Do(te.t, te.client, method, te.url, path, body)
}

func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	return enginetest.Must(te.t, te.do, want, method, path, body)
}

// removeNetworks removes every network but the default one.
func (te *testEngine) removeNetworks() {
	status, body := te.do("GET", "/networks/json", nil)
	if status != http.StatusOK {
		return
	}
	var nets []struct {
		Name string `json:"name"`
	}
	json.Unmarshal(body, &nets)
	for _, n := range nets {
		if n.Name != te.nets.DefaultNetwork {
			te.do("DELETE", "/networks/"+n.Name+"?force=true", nil)
		}
	}
}

// assertNoLeftovers fails the test when a bridge, veth peer or firewall
// rule of the test's networks, or a namespace file, is still there.
func (te *testEngine) assertNoLeftovers() {
	te.t.Helper()
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, te.nets.BridgePrefix) {
			te.t.Errorf("interface left behind: %s", line)
		}
	}
	block := strings.TrimSuffix(te.nets.SubnetPool[0], ".0/20")
	for _, table := range []string{"nat", "filter"} {
		rules, _ := exec.Command("iptables", "-t", table, "-S").Output()
		for _, line := range strings.Split(string(rules), "\n") {
			if strings.Contains(line, block+".") {
				te.t.Errorf("firewall rule left behind in %s: %s", table, line)
			}
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(te.dir, "run", "netns")); len(entries) > 0 {
		te.t.Errorf("network namespaces left behind: %v", entries)
	}
}

// create creates a container from a spec and answers its ID.
func (te *testEngine) create(spec map[string]any) string {
	te.t.Helper()
	if spec["image"] == nil {
		spec["image"] = "localhost/busybox:latest"
	}
	var out struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.must(http.StatusCreated, "POST", "/containers/create", spec), &out)
	return out.ID
}

// run creates and starts a container.
func (te *testEngine) run(spec map[string]any) string {
	te.t.Helper()
	id := te.create(spec)
	te.must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	return id
}

// exec runs a command in a container and answers its exit code and output.
func (te *testEngine) exec(id string, cmd ...string) (int, string) {
	te.t.Helper()
	var created struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.must(http.StatusCreated, "POST", "/containers/"+id+"/exec",
		map[string]any{"Cmd": cmd, "AttachStdout": true, "AttachStderr": true}), &created)
	_, body := te.do("POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": false})
	var info struct {
		ExitCode int `json:"ExitCode"`
	}
	json.Unmarshal(te.must(http.StatusOK, "GET", "/exec/"+created.ID+"/json", nil), &info)
	return info.ExitCode, demux(body)
}

// demux strips the 8-byte frame headers of an attach stream.
func demux(b []byte) string {
	var out strings.Builder
	for len(b) >= 8 {
		n := int(b[4])<<24 | int(b[5])<<16 | int(b[6])<<8 | int(b[7])
		if 8+n > len(b) {
			break
		}
		out.Write(b[8 : 8+n])
		b = b[8+n:]
	}
	return out.String()
}

// inspectNet answers a container's NetworkSettings.
type networkSettings struct {
	IPAddress  string
	Gateway    string
	MacAddress string
	SandboxKey string
	Ports      map[string][]struct{ HostIp, HostPort string }
	Networks   map[string]struct {
		IPAddress  string
		Gateway    string
		MacAddress string
		Aliases    []string
	}
}

func (te *testEngine) networkSettings(id string) networkSettings {
	te.t.Helper()
	var out struct {
		NetworkSettings networkSettings
	}
	if err := json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &out); err != nil {
		te.t.Fatal(err)
	}
	return out.NetworkSettings
}

// podman runs podman --remote against the engine when podman is installed.
func (te *testEngine) podman(args ...string) (string, error) {
	te.t.Helper()
	full := append([]string{"--remote", "--url", "tcp://" + te.addr}, args...)
	out, err := exec.Command("podman", full...).CombinedOutput()
	return string(out), err
}

func (te *testEngine) mustPodman(args ...string) string {
	te.t.Helper()
	out, err := te.podman(args...)
	if err != nil {
		te.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func requirePodman(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("podman is required (BERTH_TEST_STRICT=1)")
		}
		t.Skip("podman not installed")
	}
}

// eventually retries check until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, check func() bool) {
	t.Helper()
	if !within(d, check) {
		t.Fatalf("%s did not happen within %s", what, d)
	}
}

// within polls check every 100 ms until it holds (true) or d has passed (false).
func within(d time.Duration, check func() bool) bool {
	for deadline := time.Now().Add(d); ; {
		if check() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsonOf(t testing.TB, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}
