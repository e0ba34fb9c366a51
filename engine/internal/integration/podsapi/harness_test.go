// Package podsapi tests the pods API end to end: an engine on a loopback
// listener running real runc containers, and the podman 4.3.1 client.
package podsapi

import (
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine talks to an engine serving on a loopback listener.
type testEngine struct{ *enginetest.Engine }

// podOptions are the engine options of the pod tests: they need catatonit
// for their infra containers.
func podOptions() enginetest.Options {
	return enginetest.Options{What: "pod tests", Needs: []string{enginetest.Catatonit}}
}

// startEngine serves an engine whose containers default to a private
// network namespace (loopback only).
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, podOptions())}
}

// startBridgedEngine serves an engine with networks unique to the test,
// whose pods and containers default to the bridge network.
func startBridgedEngine(t testing.TB) *testEngine {
	t.Helper()
	o := podOptions()
	o.Bridged = true
	o.Needs = append(o.Needs, enginetest.Netavark, enginetest.AardvarkDNS)
	return &testEngine{enginetest.Start(t, o)}
}

// createIn creates a busybox container in pod running cmd and returns its ID.
func (te *testEngine) createIn(pod, name string, cmd ...string) string {
	te.T.Helper()
	return te.Create(map[string]any{"name": name, "command": cmd, "pod": pod})
}

// podInspect is the part of PodInspect the tests read.
type podInspect struct {
	ID               string
	Name             string
	State            string
	Hostname         string
	InfraContainerID string
	CgroupPath       string
	SharedNamespaces []string
	Containers       []struct {
		ID    string `json:"Id"`
		Name  string
		State string
	}
}

func (te *testEngine) inspectPod(name string) podInspect {
	te.T.Helper()
	return enginetest.Fetch[podInspect](te.Engine, "/pods/"+name+"/json")
}

// wantPodState fails the test unless the pod is in state want now; when
// says at which point of the test.
func (te *testEngine) wantPodState(name, want, when string) {
	te.T.Helper()
	if got := te.inspectPod(name).State; got != want {
		te.T.Fatalf("pod %s %s is %s, want %s", name, when, got, want)
	}
}

// waitPodState polls until the pod is in state want.
func (te *testEngine) waitPodState(name, want string) {
	te.T.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := te.inspectPod(name).State
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			te.T.Fatalf("pod %s is %s, want %s", name, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
