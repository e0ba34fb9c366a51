package kubeapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
)

// TestKubePlayPullsMissingImage plays a Pod whose image is only in a real
// registry on 127.0.0.1: the play pulls it (tlsVerify=false for the plain
// HTTP registry), and with podman 4.3.1's --tls-verify=false too.
func TestKubePlayPullsMissingImage(t *testing.T) {
	te := startEngine(t)
	registrytest.Require(t)
	reg := registrytest.Start(t, registrytest.Options{})
	ref := reg.Host + "/bkp/busybox:1"
	te.Must(http.StatusOK, "POST", "/images/localhost/busybox:latest/push?tlsVerify=false&destination="+url.QueryEscape(ref), nil)
	yaml := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: bkp-pulled}\nspec:\n  containers: [{name: c, image: %s, command: [sleep, \"100\"]}]\n", ref)

	te.Must(http.StatusNotFound, "GET", "/images/"+ref+"/exists", nil)
	te.play("?tlsVerify=false", yaml)
	te.Must(http.StatusNoContent, "GET", "/images/"+ref+"/exists", nil)
	te.Must(http.StatusOK, "DELETE", "/kube/play", strings.NewReader(yaml))

	te.Must(http.StatusOK, "DELETE", "/images/"+ref+"?force=true", nil)
	file := writeFile(t, "pulled.yaml", yaml)
	if out := te.MustPodman("kube", "play", "--tls-verify=false", file); !strings.Contains(out, "Pod:") {
		t.Fatalf("podman kube play printed:\n%s", out)
	}
	te.Must(http.StatusNoContent, "GET", "/images/"+ref+"/exists", nil)
	te.MustPodman("kube", "down", file)
}
