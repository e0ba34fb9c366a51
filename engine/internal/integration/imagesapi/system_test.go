package imagesapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berth-project/berth/shared/buildinfo"
)

func TestPingOnEveryPrefix(t *testing.T) {
	e := startEngine(t)
	for _, prefix := range []string{"/v4.3.1/libpod", "/v5.7.0/libpod", "/libpod", ""} {
		r := e.do(http.MethodGet, prefix+"/_ping", nil).expect(t, http.StatusOK)
		if string(r.body) != "OK" {
			t.Errorf("%s/_ping body %q", prefix, r.body)
		}
		for header, want := range map[string]string{
			"Libpod-Api-Version": "5.7.0",
			"Api-Version":        "1.44",
			"Cache-Control":      "no-cache",
		} {
			if got := r.header.Get(header); got != want {
				t.Errorf("%s/_ping %s = %q, want %q", prefix, header, got, want)
			}
		}
		if r.header.Get("Libpod-Buildah-Version") == "" || !strings.HasPrefix(r.header.Get("Server"), "Libpod/") {
			t.Errorf("%s/_ping headers %v", prefix, r.header)
		}
		head := e.do(http.MethodHead, prefix+"/_ping", nil).expect(t, http.StatusOK)
		if len(head.body) != 0 || head.header.Get("Libpod-Api-Version") != "5.7.0" {
			t.Errorf("HEAD %s/_ping: body %q headers %v", prefix, head.body, head.header)
		}
	}
}

func TestVersionShape(t *testing.T) {
	e := startEngine(t)
	var v struct {
		Version, ApiVersion, MinAPIVersion, Os, Arch, GoVersion, KernelVersion string
		Components                                                             []struct {
			Name, Version string
			Details       map[string]string
		}
	}
	e.do(http.MethodGet, "/v4.3.1/libpod/version", nil).expect(t, http.StatusOK).json(t, &v)
	if v.Version != "5.7.0" || v.ApiVersion != "1.44" || v.Os != "linux" || v.Arch == "" || v.GoVersion == "" || v.KernelVersion == "" {
		t.Errorf("version %+v", v)
	}
	if len(v.Components) == 0 || v.Components[0].Name != "Podman Engine" || v.Components[0].Details["APIVersion"] != "5.7.0" {
		t.Errorf("components %+v", v.Components)
	}
	// Berth's own build beside the API version it speaks.
	build := buildinfo.Get()
	found := false
	for _, c := range v.Components {
		if c.Name == "Berth Engine" {
			found = c.Version == build.Version && c.Details["Commit"] == build.Commit && c.Details["APIVersion"] == "5.7.0"
		}
	}
	if !found {
		t.Errorf("no Berth Engine component with version %s, commit %s: %+v", build.Version, build.Commit, v.Components)
	}
}

func TestInfoDescribesStore(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/info:1"))
	var info struct {
		Host struct {
			OS, Arch, Kernel, Hostname string
			CPUs                       int                   `json:"cpus"`
			MemTotal                   int64                 `json:"memTotal"`
			OCIRuntime                 struct{ Name string } `json:"ociRuntime"`
		} `json:"host"`
		Store struct {
			GraphRoot       string               `json:"graphRoot"`
			RunRoot         string               `json:"runRoot"`
			GraphDriverName string               `json:"graphDriverName"`
			ImageStore      struct{ Number int } `json:"imageStore"`
		} `json:"store"`
		Registries map[string]any                       `json:"registries"`
		Version    struct{ APIVersion, Version string } `json:"version"`
		Berth      struct {
			Name, Version, Commit, GoVersion, APIVersion string
		} `json:"berth"`
	}
	e.do(http.MethodGet, "/libpod/info", nil).expect(t, http.StatusOK).json(t, &info)
	if info.Host.OS != "linux" || info.Host.CPUs < 1 || info.Host.MemTotal <= 0 || info.Host.OCIRuntime.Name != "runc" {
		t.Errorf("host %+v", info.Host)
	}
	if !strings.HasSuffix(info.Store.GraphRoot, "/root/storage") || !strings.HasSuffix(info.Store.RunRoot, "/run/storage") {
		t.Errorf("store paths %+v", info.Store)
	}
	if info.Store.GraphDriverName != "overlay" && info.Store.GraphDriverName != "vfs" {
		t.Errorf("driver %q", info.Store.GraphDriverName)
	}
	if info.Store.ImageStore.Number != 1 {
		t.Errorf("image count %d, want 1", info.Store.ImageStore.Number)
	}
	if info.Version.APIVersion != "5.7.0" {
		t.Errorf("version %+v", info.Version)
	}
	if b := buildinfo.Get(); info.Berth.Name != "Berth Engine" || info.Berth.Version != b.Version || info.Berth.Commit != b.Commit || info.Berth.APIVersion != "5.7.0" {
		t.Errorf("berth %+v", info.Berth)
	}
	if _, ok := info.Registries["search"]; !ok {
		t.Errorf("registries %v", info.Registries)
	}
}

func TestUnknownRoutesAnswerEngineErrors(t *testing.T) {
	e := startEngine(t)
	// Paths outside libpod's tree ("/nothing") are Docker's API (dockercli tests them).
	for _, path := range []string{"/libpod/nothing", "/v4.3.1/libpod/images/x/frobnicate", "/v1.41/libpod/nothing"} {
		e.do(http.MethodGet, path, nil).engineError(t, http.StatusNotFound)
	}
	e.do(http.MethodPut, "/libpod/_ping", nil).engineError(t, http.StatusMethodNotAllowed)
}

func TestSwaggerServed(t *testing.T) {
	e := startEngine(t)
	r := e.do(http.MethodGet, "/v4.3.1/libpod/swagger", nil).expect(t, http.StatusOK)
	if !strings.Contains(string(r.body), "/images/json") {
		t.Errorf("swagger document lacks /images/json")
	}
}

func TestHealthAndMetrics(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/metrics:1"))
	e.do(http.MethodGet, "/healthz", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, "/readyz", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, "/libpod/_ping", nil).expect(t, http.StatusOK)
	r := e.do(http.MethodGet, "/metrics", nil).expect(t, http.StatusOK)
	for _, want := range []string{"berth_engine_http_requests_total", "berth_engine_images 1\n", "berth_engine_image_store_bytes 2."} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
