package securityapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine is an engine on a loopback listener.
type testEngine struct{ *enginetest.Engine }

// securityOptions are the options of the security tests' engines: private
// networking, no image (the tests load theirs), the podman client.
func securityOptions() enginetest.Options {
	return enginetest.Options{What: "security tests", Needs: []string{"podman"}, NoImage: true}
}

// startEngine starts an engine with its own state; everything it made is
// removed and the host checked when the test ends.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	te := &testEngine{enginetest.Start(t, securityOptions())}
	te.Client.Timeout = time.Minute
	reachableFromUserns(te.Dir)
	return te
}

// reachableFromUserns lets the root of a user namespace reach the engine's
// state below dir.
func reachableFromUserns(dir string) {
	os.Chmod(dir, 0o711)
	os.Chmod(filepath.Dir(dir), 0o711)
}

// inspect answers the container's inspect document as generic JSON.
func (te *testEngine) inspect(name string) map[string]any {
	te.T.Helper()
	return enginetest.Fetch[map[string]any](te.Engine, "/containers/"+name+"/json")
}

// hostSecurity is what podman info says of the host's security.
type hostSecurity struct {
	ApparmorEnabled    bool   `json:"apparmorEnabled"`
	SeccompEnabled     bool   `json:"seccompEnabled"`
	SeccompProfilePath string `json:"seccompProfilePath"`
}

// hostSecurity answers podman info's host security section.
func (te *testEngine) hostSecurity() hostSecurity {
	te.T.Helper()
	var info struct {
		Host struct {
			Security hostSecurity `json:"security"`
		} `json:"host"`
	}
	if err := json.Unmarshal([]byte(te.MustPodman("info", "--format", "json")), &info); err != nil {
		te.T.Fatal(err)
	}
	return info.Host.Security
}

// busybox is the test image: busybox with its applets.
var busybox = testimage.Busybox("localhost/busybox:latest", "sh")

// writeFile writes a file under the test's directory and returns its path.
func (te *testEngine) writeFile(name, content string) string {
	te.T.Helper()
	p := filepath.Join(te.Dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		te.T.Fatal(err)
	}
	return p
}

// testImageWithLabel is the busybox image with labels.
func testImageWithLabel(tag string, labels map[string]string) testimage.Image {
	img := testimage.Busybox(tag, "sh")
	img.Config.Labels = labels
	return img
}
