package imagesapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPlatformChoosesTheImage: a registry list with this machine's image
// and an arm64 one. podman's --arch and --platform (its pull with policy
// missing, then create with image_arch) and Docker's platform query take
// the instance asked for; a local image for another platform is not the
// one asked for: the pull fetches the right one, and Docker's create
// answers 404 naming both platforms (on which its CLI pulls and creates
// again). Nothing is created for a platform nothing provides.
func TestPlatformChoosesTheImage(t *testing.T) {
	e, p, reg := startWithRegistry(t, "localhost/platbase:1")
	armID := strings.TrimPrefix(e.importArch(t, "localhost/platbase:arm", "arm64"), "sha256:")
	p.run("manifest", "create", "platlist")
	p.run("manifest", "add", "platlist", "containers-storage:localhost/platbase:1")
	p.run("manifest", "add", "--arch", "arm64", "platlist", "containers-storage:localhost/platbase:arm")
	ref := reg.Host + "/plat:1"
	p.run("manifest", "push", "--all", "--tls-verify=false", "platlist", "docker://"+ref)
	p.run("manifest", "rm", "platlist")
	p.run("rmi", "localhost/platbase:arm")

	archOf := func(name string) string {
		t.Helper()
		var img struct{ Architecture string }
		e.do(http.MethodGet, "/v4.3.1/libpod/images/"+url.PathEscape(name)+"/json", nil).expect(t, http.StatusOK).json(t, &img)
		return img.Architecture
	}
	imageOf := func(ctr string) string {
		t.Helper()
		var c struct{ Image string }
		e.do(http.MethodGet, "/v4.3.1/libpod/containers/"+ctr+"/json", nil).expect(t, http.StatusOK).json(t, &c)
		return strings.TrimPrefix(c.Image, "sha256:")
	}

	p.run("pull", "--tls-verify=false", ref)
	if got := archOf(ref); got != hostArch() {
		t.Fatalf("a plain pull took the %s instance", got)
	}
	// The local image is this machine's: --arch arm64 must pull arm64's.
	p.run("create", "--tls-verify=false", "--arch", "arm64", "--name", "on-arm", ref, "true")
	if got := imageOf("on-arm"); got != armID {
		t.Errorf("--arch arm64 created on image %s, want the arm64 one %s", got, armID)
	}
	if got := archOf(ref); got != "arm64" {
		t.Errorf("after --arch arm64 the name points at a %s image", got)
	}
	// Nothing provides s390x, and the policy forbids a pull.
	if _, stderr, err := p.try("create", "--pull", "never", "--arch", "s390x", "--name", "on-s390x", ref, "true"); err == nil || !strings.Contains(stderr, "linux/s390x") {
		t.Errorf("--arch s390x with --pull never: %v %s", err, stderr)
	}
	if status := e.do(http.MethodGet, "/v4.3.1/libpod/containers/on-s390x/json", nil).status; status != http.StatusNotFound {
		t.Errorf("a refused create left a container (%d)", status)
	}
	p.run("create", "--tls-verify=false", "--platform", "linux/"+hostArch(), "--name", "on-host", ref, "true")
	if got := archOf(ref); got != hostArch() {
		t.Errorf("after --platform linux/%s the name points at a %s image", hostArch(), got)
	}

	// Docker's create with the local image for another platform: 404
	// naming both, then the CLI's pull with the platform, then create.
	create := func(platform string) response {
		return e.do(http.MethodPost, "/v1.43/containers/create?name=d-arm&platform="+url.QueryEscape(platform), strings.NewReader(`{"Image":"`+ref+`","Cmd":["true"]}`))
	}
	r := create("linux/arm64")
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "linux/arm64") || !strings.Contains(string(r.body), "linux/"+hostArch()) {
		t.Fatalf("Docker create for arm64 over a %s image: %d %s", hostArch(), r.status, r.body)
	}
	pull := e.do(http.MethodPost, "/v1.43/images/create?fromImage="+url.QueryEscape(reg.Host+"/plat")+"&tag=1&platform=linux%2Farm64", nil).expect(t, http.StatusOK)
	if strings.Contains(string(pull.body), `"error"`) {
		t.Fatalf("Docker pull of arm64: %s", pull.body)
	}
	create("linux/arm64").expect(t, http.StatusCreated)
	if got := imageOf("d-arm"); got != armID {
		t.Errorf("Docker create for arm64 used image %s, want %s", got, armID)
	}
	if r := create("a/b/c/d"); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "platform") {
		t.Errorf("a malformed platform: %d %s", r.status, r.body)
	}
}
