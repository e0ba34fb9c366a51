package buildapi

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestPodmanBuildPullsWithCredentials builds FROM an image in an
// htpasswd-protected registry: podman 4.3.1 sends --creds as
// X-Registry-Auth and --authfile as X-Registry-Config, and the FROM pull
// uses them; a wrong password fails the build with the registry's
// authentication error.
func TestPodmanBuildPullsWithCredentials(t *testing.T) {
	enginetest.RequirePodman(t)
	reg := registrytest.Start(t, registrytest.Options{Username: "berth", Password: "s3cret"})
	e := startEngine(t)
	dir := t.TempDir()
	private := reg.Host + "/private/busybox:1"
	if out, err := podman(t, e, dir, "push", "--creds", "berth:s3cret", "--tls-verify=false", "localhost/busybox:latest", private); err != nil {
		t.Fatalf("push to the registry: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte("FROM "+private+"\nRUN echo pulled > /pulled\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := podman(t, e, dir, "build", "--creds", "berth:wrong", "--tls-verify=false", "-t", "authed:bad", ".")
	if err == nil || !strings.Contains(out, "authentication required") {
		t.Fatalf("build with a wrong password: %v\n%s", err, out)
	}
	t.Logf("wrong password: %s", out)
	if out, err := podman(t, e, dir, "build", "--tls-verify=false", "-t", "authed:none", "."); err == nil {
		t.Fatalf("build without credentials pulled from a protected registry:\n%s", out)
	}

	out, err = podman(t, e, dir, "build", "--creds", "berth:s3cret", "--tls-verify=false", "-t", "authed:creds", ".")
	if err != nil || !strings.Contains(out, "Successfully tagged localhost/authed:creds") {
		t.Fatalf("build with --creds: %v\n%s", err, out)
	}
	if out, err := podman(t, e, dir, "rmi", "authed:creds", private); err != nil {
		t.Fatalf("removing the pulled image: %v\n%s", err, out)
	}

	authfile := filepath.Join(dir, "auth.json")
	token := base64.StdEncoding.EncodeToString([]byte("berth:s3cret"))
	if err := os.WriteFile(authfile, []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = podman(t, e, dir, "build", "--authfile", authfile, "--tls-verify=false", "-t", "authed:file", ".")
	if err != nil || !strings.Contains(out, "Successfully tagged localhost/authed:file") {
		t.Fatalf("build with --authfile: %v\n%s", err, out)
	}
	out, err = podman(t, e, dir, "run", "--rm", "--network", "none", "authed:file", "cat", "/pulled")
	if err != nil || strings.TrimSpace(out) != "pulled" {
		t.Fatalf("run of the built image: %v\n%s", err, out)
	}
}
