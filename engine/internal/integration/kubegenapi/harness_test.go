// Package kubegenapi tests kube generate and kube apply end to end: an
// engine on a loopback listener with real containers, pods and volumes, the
// podman 4.3.1 client, kube play for the round trip, and a real
// kube-apiserver (with etcd) that kube apply sends the objects to.
package kubegenapi

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-project/berth/engine/internal/backend/deploy/kubeapply"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine talks to an engine serving on a loopback listener.
type testEngine struct{ *enginetest.Engine }

// startEngine serves an engine whose networks are unique to the test.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, enginetest.Options{What: "kube generate tests", Bridged: true,
		Needs: []string{enginetest.Catatonit, enginetest.Netavark, enginetest.AardvarkDNS}})}
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
