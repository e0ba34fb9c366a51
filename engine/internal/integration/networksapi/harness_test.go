package networksapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine is an engine with networks unique to the test.
type testEngine struct {
	*enginetest.Engine
	// netIDs caches network IDs by name (see dnsEntryIDs).
	netIDs map[string]string
}

// networkOptions are the options of the network tests' engines: netavark,
// aardvark-dns and iptables, containers on the bridge network by default,
// the busybox image with the network applets. Start's cleanup fails the
// test for anything of its networks left on the host (NetworkLeaks).
func networkOptions() enginetest.Options {
	img := busyboxImage()
	return enginetest.Options{What: "network tests", Bridged: true, Image: &img,
		Needs: []string{enginetest.Netavark, enginetest.AardvarkDNS, "iptables"}}
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
	te := &testEngine{Engine: enginetest.Start(t, networkOptions())}
	te.Client.Timeout = 2 * time.Minute
	return te
}

// assertNoLeftovers fails the test when a bridge or firewall rule of the
// test's networks, or a namespace file, is still there.
func (te *testEngine) assertNoLeftovers() {
	te.T.Helper()
	for _, l := range te.NetworkLeaks() {
		te.T.Errorf("left behind: %s", l)
	}
}

// exec runs a command in a container and answers its exit code and output.
func (te *testEngine) exec(id string, cmd ...string) (int, string) {
	te.T.Helper()
	var created struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+id+"/exec",
		map[string]any{"Cmd": cmd, "AttachStdout": true, "AttachStderr": true}), &created)
	_, body := te.Do("POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": false})
	var info struct {
		ExitCode int `json:"ExitCode"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/exec/"+created.ID+"/json", nil), &info)
	return info.ExitCode, enginetest.Demux(body)
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
	te.T.Helper()
	var out struct {
		NetworkSettings networkSettings
	}
	te.Get("/containers/"+id+"/json", &out)
	return out.NetworkSettings
}

func jsonOf(t testing.TB, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}
