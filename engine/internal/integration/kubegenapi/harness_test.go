// Package kubegenapi tests kube generate and kube apply end to end: an
// engine on a loopback listener with real containers, pods and volumes, the
// podman 4.3.1 client, kube play for the round trip, and a real
// kube-apiserver (with etcd) that kube apply sends the objects to.
package kubegenapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containers/storage/pkg/reexec"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-project/berth/engine/internal/backend/deploy/kubeapply"
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

// testEngine talks to an engine serving on a loopback listener.
type testEngine struct {
	t      testing.TB
	url    string
	addr   string
	client *http.Client
}

// requireRuntime skips (or fails under BERTH_TEST_STRICT=1) without root,
// runc, conmon, busybox-static, catatonit or netavark.
func requireRuntime(t testing.TB) {
	t.Helper()
	enginetest.RequireRuntime(t, "kube generate tests")
	for _, p := range []string{"/usr/bin/catatonit", "/usr/lib/podman/netavark", "/usr/lib/podman/aardvark-dns"} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("BERTH_TEST_STRICT") == "1" {
				t.Fatalf("kube generate tests need %s (BERTH_TEST_STRICT=1)", p)
			}
			t.Skipf("kube generate tests need %s", p)
		}
	}
}

// startEngine serves an engine whose networks are unique to the test.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
	dir := t.TempDir()
	root, runRoot := filepath.Join(dir, "root"), filepath.Join(dir, "run")
	addr, stop := enginetest.ServeConfig(t, engine.Config{Root: root, RunRoot: runRoot, Runtime: "runc", Network: enginetest.UniqueNetworks(t)})
	te := &testEngine{t: t, addr: addr, url: "http://" + addr + "/v4.3.1/libpod", client: &http.Client{}}
	t.Cleanup(func() {
		te.removeAll()
		stop()
		enginetest.UnmountUnder(dir, 1)
	})
	var buf bytes.Buffer
	img := testimage.Busybox("localhost/busybox:latest", "sh")
	img.Config.StopSignal = ""
	if err := testimage.DockerArchive(&buf, img); err != nil {
		t.Fatal(err)
	}
	te.must(http.StatusOK, "POST", "/images/load", &buf)
	return te
}

func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	return enginetest.Do(te.t, te.client, method, te.url, path, body)
}

func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	return enginetest.Must(te.t, te.do, want, method, path, body)
}

// removeAll removes every pod, then every container and volume left.
func (te *testEngine) removeAll() {
	status, body := te.do("GET", "/pods/json", nil)
	if status == http.StatusOK {
		var pods []struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(body, &pods)
		for _, p := range pods {
			te.do("DELETE", "/pods/"+p.ID+"?force=true&timeout=0", nil)
		}
	}
	enginetest.RemoveAll(te.do)
	te.do("POST", "/volumes/prune", nil)
}

// create creates a container from spec and returns its ID.
func (te *testEngine) create(spec map[string]any) string {
	te.t.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(te.must(http.StatusCreated, "POST", "/containers/create", spec), &out); err != nil {
		te.t.Fatal(err)
	}
	return out.ID
}

// createPod creates a pod from spec and returns its ID.
func (te *testEngine) createPod(spec map[string]any) string {
	te.t.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(te.must(http.StatusCreated, "POST", "/pods/create", spec), &out); err != nil {
		te.t.Fatal(err)
	}
	return out.ID
}

// podman runs the podman 4.3.1 client against the engine, or skips
// (fails under BERTH_TEST_STRICT=1) when it is not installed.
func (te *testEngine) podman(args ...string) string {
	te.t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			te.t.Fatal("podman is not installed (BERTH_TEST_STRICT=1)")
		}
		te.t.Skip("podman is not installed")
	}
	out, err := exec.Command("podman", append([]string{"--remote", "--url", "tcp://" + te.addr}, args...)...).Output()
	if err != nil {
		te.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// objects parses generated YAML strictly into the k8s.io/api types and
// returns them by "Kind/name".
func objects(t testing.TB, yaml []byte) map[string]runtime.Object {
	t.Helper()
	objs, err := kubeapply.ParseObjects(yaml)
	if err != nil {
		t.Fatalf("generated YAML does not parse back: %v\n%s", err, yaml)
	}
	out := map[string]runtime.Object{}
	for _, o := range objs {
		typed, err := typedObject(o)
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		out[o.GetKind()+"/"+o.GetName()] = typed
	}
	return out
}

// typedObject converts an object into its k8s.io/api type.
func typedObject(u *unstructured.Unstructured) (runtime.Object, error) {
	var obj runtime.Object
	switch u.GetKind() {
	case "Pod":
		obj = &corev1.Pod{}
	case "Service":
		obj = &corev1.Service{}
	case "PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "Job":
		obj = &batchv1.Job{}
	default:
		return nil, fmt.Errorf("unexpected kind %s", u.GetKind())
	}
	return obj, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true)
}
