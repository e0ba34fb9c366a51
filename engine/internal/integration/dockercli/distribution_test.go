package dockercli

import (
	"encoding/json"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestDockerDistributionInspect: GET /distribution/{name}/json against a
// local registry: the pushed manifest's descriptor (the digest docker push
// reported) and its platform; a manifest list's platforms; an unknown tag
// is 404 and a malformed name 400.
func TestDockerDistributionInspect(t *testing.T) {
	te := startEngine(t)
	reg := "localhost:" + startRegistry(t, t.TempDir())
	te.run("docker", "tag", "localhost/busybox:latest", reg+"/busybox:1")
	pushed := regexp.MustCompile(`digest: (sha256:[0-9a-f]{64})`).FindStringSubmatch(te.run("docker", "push", reg+"/busybox:1"))
	if pushed == nil {
		t.Fatal("docker push reported no digest")
	}
	type inspect struct {
		Descriptor struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
			Size      int64  `json:"size"`
		}
		Platforms []struct {
			Architecture string `json:"architecture"`
			OS           string `json:"os"`
		}
	}
	get := func(name string) (int, inspect, string) {
		t.Helper()
		code, _, body := te.Exchange("GET", te.Base()+"/v1.44/distribution/"+name+"/json", "", nil)
		var got inspect
		if code == http.StatusOK {
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%s: %v: %s", name, err, body)
			}
		}
		return code, got, string(body)
	}
	code, got, body := get(reg + "/busybox:1")
	if code != http.StatusOK || got.Descriptor.Digest != pushed[1] || got.Descriptor.Size <= 0 ||
		got.Descriptor.MediaType != "application/vnd.docker.distribution.manifest.v2+json" ||
		len(got.Platforms) != 1 || got.Platforms[0].OS != "linux" || got.Platforms[0].Architecture != runtime.GOARCH {
		t.Fatalf("distribution of %s/busybox:1: %d %s (pushed %s)", reg, code, body, pushed[1])
	}
	if code, _, body := get(reg + "/busybox:nope"); code != http.StatusNotFound {
		t.Fatalf("an unknown tag: %d %s", code, body)
	}
	if code, _, body := get("Bad%20Name"); code != http.StatusBadRequest {
		t.Fatalf("a malformed name: %d %s", code, body)
	}

	// A manifest list (made and pushed through the libpod API) answers its
	// entries' platforms.
	te.Must(http.StatusCreated, "POST", "/manifests/dist-list?images=localhost/busybox:latest", nil)
	te.Must(http.StatusOK, "POST", "/manifests/dist-list/registry/"+reg+"/list:1?tlsVerify=false&all=true", nil)
	code, got, body = get(reg + "/list:1")
	if code != http.StatusOK || !strings.Contains(got.Descriptor.MediaType, "list") && !strings.Contains(got.Descriptor.MediaType, "index") ||
		len(got.Platforms) != 1 || got.Platforms[0].Architecture != runtime.GOARCH {
		t.Fatalf("distribution of the list: %d %s", code, body)
	}
}
