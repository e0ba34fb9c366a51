package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUploadDeploysUnitsAndKube: one upload holds an image archive, a .container unit
// running that image, a Kubernetes pod of the same image, a .kube unit with the YAML it
// names and a unit with a typo. It ends done with one error entry (the typo, with the
// engine's message); the unit's container, the YAML's pod and the .kube unit's pod all
// run in the engine.
func TestUploadDeploysUnitsAndKube(t *testing.T) {
	ctx := context.Background()
	s := startStack(t, ctx)
	const tag = "localhost/berth-e2e-app:latest"
	unit := "[Unit]\nDescription=berth e2e container\n\n[Container]\nImage=" + tag + "\nExec=sleep 600\n"
	kube := `apiVersion: v1
kind: Pod
metadata:
  name: berth-e2e-kube
spec:
  containers:
  - name: sleeper
    image: ` + tag + `
    command: ["sleep", "600"]
`
	const brokenUnit = "units/broken.container"
	// Lexical order would deploy the units and the YAML before the archive
	// (images/ sorts after deploy/): the processor deploys archives first.
	id := s.createUpload(map[string][]byte{
		"images/app.tar":       busyboxArchive(t, tag),
		"deploy/web.container": []byte(unit),
		"deploy/app.yaml":      []byte(kube),
		brokenUnit:             []byte("[Container]\nImage=" + tag + "\nImagee=typo\n"),
		// A .kube unit and the YAML it names: sent together, played once, by the unit.
		"deploy/play.kube":         []byte("[Kube]\nYaml=k8s/unit-pod.yaml\n"),
		"deploy/k8s/unit-pod.yaml": []byte(strings.Replace(kube, "name: berth-e2e-kube", "name: berth-e2e-kubeunit", 1)),
	})
	s.markForProcessing(id)
	u := s.waitFor(id, 3*time.Minute, "status done", func(u upload) bool { return u.Status == "done" })
	checkDone(t, u, 6, 6, 1)
	errs := s.uploadErrors(id)
	if len(errs) != 1 || errs[0].File != brokenUnit || !strings.Contains(errs[0].Message, "Imagee") ||
		!strings.HasPrefix(errs[0].Message, "quadlet unit refused by the engine (400)") {
		t.Errorf("upload errors = %+v, want exactly one for %s naming the key Imagee", errs, brokenUnit)
	}

	// The unit's container: running, of the image, in no pod; the pod's beside it.
	unitCtr, podCtr := s.checkWorkloads(tag)
	if !s.podRunning("berth-e2e-kubeunit") {
		t.Errorf("pod berth-e2e-kubeunit of play.kube is not running")
	}

	// Uploading the same unit and YAML again replaces what the first upload
	// made: no conflict, and again exactly one of each running, new ones.
	again := s.createUpload(map[string][]byte{"web.container": []byte(unit), "app.yaml": []byte(kube)})
	s.markForProcessing(again)
	u = s.waitFor(again, 3*time.Minute, "status done", func(u upload) bool { return u.Status == "done" })
	if intOf(u.FilesProcessed) != 2 || intOf(u.Errors) != 0 {
		t.Errorf("re-upload: processed %d, errors %d %+v; want 2, 0", intOf(u.FilesProcessed), intOf(u.Errors), s.uploadErrors(again))
	}
	if unitAgain, podAgain := s.checkWorkloads(tag); unitAgain == unitCtr || podAgain == podCtr {
		t.Errorf("re-upload left containers running: unit's %s then %s, pod's %s then %s; want both replaced", unitCtr, unitAgain, podCtr, podAgain)
	}
	status, body := s.callEngine(http.MethodGet, "/v4.0.0/libpod/quadlets/web.container/exists")
	if status != http.StatusNoContent {
		t.Errorf("quadlet web.container exists: %d %s", status, body)
	}
	status, body = s.callEngine(http.MethodGet, "/v4.0.0/libpod/quadlets/broken.container/exists")
	if status != http.StatusNotFound {
		t.Errorf("refused quadlet broken.container exists: %d %s, want 404", status, body)
	}
}

// checkWorkloads checks that exactly one container of image runs outside any pod (the
// unit's) and one in pod berth-e2e-kube (the YAML's), that the pod is Running, and
// returns their IDs.
func (s *stack) checkWorkloads(image string) (unitContainer, podContainer string) {
	t := s.t
	t.Helper()
	var unitIDs, podIDs []string
	running := s.runningContainers()
	for _, c := range running {
		switch {
		case c.Image != image:
		case c.PodName == "":
			unitIDs = append(unitIDs, c.ID)
		case c.PodName == "berth-e2e-kube":
			podIDs = append(podIDs, c.ID)
		}
	}
	if len(unitIDs) != 1 || len(podIDs) != 1 {
		t.Errorf("running containers = %+v; want one of %s from web.container (no pod) and one in pod berth-e2e-kube", running, image)
	}
	if !s.podRunning("berth-e2e-kube") {
		t.Errorf("pod berth-e2e-kube is not running")
	}
	return strings.Join(unitIDs, ","), strings.Join(podIDs, ",")
}

// podRunning reports whether the engine lists pod name as Running.
func (s *stack) podRunning(name string) bool {
	s.t.Helper()
	pods := decode[[]struct {
		Name   string `json:"Name"`
		Status string `json:"Status"`
	}](s.t, s.mustEngine("/v4.0.0/libpod/pods/json"))
	for _, p := range pods {
		if p.Name == name && p.Status == "Running" {
			return true
		}
	}
	s.t.Logf("pods = %+v", pods)
	return false
}

// engineContainer is the part of the engine's container list the tests read.
type engineContainer struct {
	ID      string   `json:"Id"`
	Names   []string `json:"Names"`
	Image   string   `json:"Image"`
	State   string   `json:"State"`
	PodName string   `json:"PodName"`
}

// runningContainers lists the engine's running containers.
func (s *stack) runningContainers() []engineContainer {
	s.t.Helper()
	return decode[[]engineContainer](s.t, s.mustEngine("/v4.0.0/libpod/containers/json"))
}

// mustEngine GETs path on the engine and returns the body of its 200 answer.
func (s *stack) mustEngine(path string) []byte {
	s.t.Helper()
	status, body := s.callEngine(http.MethodGet, path)
	if status != http.StatusOK {
		s.t.Fatalf("engine GET %s: %d %s", path, status, body)
	}
	return body
}
