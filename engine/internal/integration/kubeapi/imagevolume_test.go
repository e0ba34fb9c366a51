package kubeapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const imageVolumeYAML = `apiVersion: v1
kind: Pod
metadata:
  name: bkiv
spec:
  volumes:
  - name: tools
    image: {reference: "localhost/busybox:latest", pullPolicy: IfNotPresent}
  containers:
  - name: c
    image: localhost/busybox:latest
    command: [sleep, "300"]
    volumeMounts:
    - {name: tools, mountPath: /tools}
    - {name: tools, mountPath: /bin2, subPath: bin}
`

// TestKubePlayImageVolume: a pod volume of kind image (Kubernetes' image
// volume) mounts the image's files read-only, whole or a subPath of it;
// subPath on another kind of volume, and an image volume whose image is
// missing with pullPolicy Never, are 400s naming the field.
func TestKubePlayImageVolume(t *testing.T) {
	te := playWithPodman(t, imageVolumeYAML)
	out := te.MustPodman("exec", "bkiv-c", "sh", "-c", "ls /tools/bin/busybox /bin2/busybox; touch /tools/x 2>/dev/null || echo read-only")
	if want := "/bin2/busybox\n/tools/bin/busybox\nread-only"; strings.TrimSpace(out) != want {
		t.Fatalf("the image volume:\n%s\nwant:\n%s", out, want)
	}
	// kube generate writes the image volume back, and it plays again.
	gen := te.MustPodman("kube", "generate", "bkiv")
	if !strings.Contains(gen, "image:\n      pullPolicy: IfNotPresent\n      reference: ") || !strings.Contains(gen, "subPath: bin") {
		t.Errorf("kube generate lost the image volume:\n%s", gen)
	}
	te.MustPodman("pod", "rm", "-f", "-t", "0", "bkiv")
	te.play("", gen)
	// The generated container keeps its full name: played again it is bkiv-bkiv-c.
	if out := te.MustPodman("exec", "bkiv-bkiv-c", "ls", "/bin2/busybox"); strings.TrimSpace(out) != "/bin2/busybox" {
		t.Errorf("the generated YAML played: %q", out)
	}
	te.MustPodman("pod", "rm", "-f", "-t", "0", "bkiv")
	te.expectRefused([]refusedPlay{
		{"volumeMounts[0].subPath", strings.Replace(strings.Replace(imageVolumeYAML, `image: {reference: "localhost/busybox:latest", pullPolicy: IfNotPresent}`, "emptyDir: {}", 1), "mountPath: /tools}", "mountPath: /tools, subPath: x}", 1)},
		{"volumes[0].image", strings.Replace(imageVolumeYAML, `reference: "localhost/busybox:latest", pullPolicy: IfNotPresent`, `reference: "localhost/nosuch:1", pullPolicy: Never`, 1)},
	}, http.StatusBadRequest, http.StatusNotFound)
}

const subPathYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: bksp-cm}
data: {app.conf: "listen 8080", other: "x"}
---
apiVersion: v1
kind: Pod
metadata: {name: bksp}
spec:
  volumes:
  - {name: cm, configMap: {name: bksp-cm}}
  containers:
  - name: c
    image: localhost/busybox:latest
    command: [sleep, "300"]
    volumeMounts:
    - {name: cm, mountPath: /etc/app.conf, subPath: app.conf}
`

// TestKubePlayVolumeSubPath: a subPath on a ConfigMap (or claim, or secret)
// volume mounts that key's file alone, the most common use of subPath, and
// one on a hostPath volume that part of the host directory; kube generate
// writes them back. A subPath that leads out of the volume is a 400 naming
// it, and so is one on an emptyDir.
func TestKubePlayVolumeSubPath(t *testing.T) {
	te := playWithPodman(t, subPathYAML)
	out := te.MustPodman("exec", "bksp-c", "sh", "-c", "cat /etc/app.conf; echo; ls /etc/other 2>/dev/null || echo only-the-key")
	if want := "listen 8080\nonly-the-key"; strings.TrimSpace(out) != want {
		t.Fatalf("the ConfigMap key by subPath:\n%s\nwant:\n%s", out, want)
	}
	if gen := te.MustPodman("kube", "generate", "bksp"); !strings.Contains(gen, "subPath: app.conf") {
		t.Errorf("kube generate lost the subPath:\n%s", gen)
	}
	te.MustPodman("pod", "rm", "-f", "-t", "0", "bksp")

	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "conf", "site.conf"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostYAML := strings.NewReplacer("configMap: {name: bksp-cm}", "hostPath: {path: "+host+"}", "subPath: app.conf", "subPath: conf/site.conf", "bksp", "bkhp").Replace(subPathYAML)
	te.play("", hostYAML)
	if out := te.MustPodman("exec", "bkhp-c", "cat", "/etc/app.conf"); strings.TrimSpace(out) != "from the host" {
		t.Errorf("a hostPath's part by subPath: %q", out)
	}
	if gen := te.MustPodman("kube", "generate", "bkhp"); !strings.Contains(gen, "subPath: conf/site.conf") {
		t.Errorf("kube generate lost the hostPath's subPath:\n%s", gen)
	}
	te.MustPodman("pod", "rm", "-f", "-t", "0", "bkhp")
	te.expectRefused([]refusedPlay{
		{"volumeMounts[0].subPath", strings.Replace(subPathYAML, "subPath: app.conf", "subPath: ../x", 1)},
		{"volumeMounts[0].subPath", strings.Replace(strings.Replace(subPathYAML, "configMap: {name: bksp-cm}", "emptyDir: {}", 1), "bksp", "bksp2", -1)},
	}, http.StatusBadRequest)
}

// TestKubePlayNoPodPrefix: noPodPrefix (Podman 6's kube play
// --no-pod-prefix, sent as nopodprefix) names each container as the YAML
// does; without it the pod's name comes first. It was not read before.
func TestKubePlayNoPodPrefix(t *testing.T) {
	te := startEngine(t)
	yaml := "apiVersion: v1\nkind: Pod\nmetadata: {name: bknp}\nspec:\n  containers:\n  - {name: web, image: localhost/busybox:latest, command: [sleep, \"300\"]}\n"
	te.play("?nopodprefix=true", yaml)
	te.Must(http.StatusOK, "GET", "/containers/web/json", nil)
	te.Must(http.StatusOK, "DELETE", "/pods/bknp?force=true", nil)
	te.play("", yaml)
	te.Must(http.StatusOK, "GET", "/containers/bknp-web/json", nil)
	te.Must(http.StatusNotFound, "GET", "/containers/web/json", nil)
}
