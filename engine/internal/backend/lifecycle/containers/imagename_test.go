package containers_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"testing"
)

// psImages lists (all) containers matching the filters and returns their Image fields by name.
func (te *testEngine) psImages(filters map[string][]string) map[string]string {
	te.T.Helper()
	q := "/containers/json?all=true"
	if filters != nil {
		data, _ := json.Marshal(filters)
		q += "&filters=" + url.QueryEscape(string(data))
	}
	var list []struct {
		Image string
		Names []string
	}
	te.Get(q, &list)
	out := map[string]string{}
	for _, c := range list {
		out[c.Names[0]] = c.Image
	}
	return out
}

// TestContainerRecordsGivenImageName: a container records the (normalized)
// name it was created with, not the image's first tag, and the ancestor
// filter parses names with a registry port.
func TestContainerRecordsGivenImageName(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusCreated, "POST", "/images/localhost/busybox:latest/tag?repo=127.0.0.1:5999/qa/bb&tag=1", nil)
	te.create(map[string]any{"name": "bylocal", "image": "localhost/busybox", "command": []string{"true"}})
	te.create(map[string]any{"name": "byport", "image": "127.0.0.1:5999/qa/bb:1", "command": []string{"true"}})
	te.create(map[string]any{"name": "byshort", "image": "busybox", "command": []string{"true"}})
	got := te.psImages(nil)
	want := map[string]string{"bylocal": "localhost/busybox:latest", "byport": "127.0.0.1:5999/qa/bb:1", "byshort": "localhost/busybox:latest"}
	for name, img := range want {
		if got[name] != img {
			t.Errorf("%s: image %q, want %q (all: %v)", name, got[name], img, got)
		}
	}
	for _, tc := range []struct {
		ancestor string
		want     []string
	}{
		{"localhost/busybox:latest", []string{"bylocal", "byshort"}},
		{"localhost/busybox", []string{"bylocal", "byshort"}},
		{"busybox", []string{"bylocal", "byshort"}},
		{"127.0.0.1:5999/qa/bb:1", []string{"byport"}},
		{"qa/bb:1", []string{"byport"}},
		{"127.0.0.1:5999/qa/bb", nil},
		{"127.0.0.1", nil},
		{"localhost", nil},
	} {
		var names []string
		for n := range te.psImages(map[string][]string{"ancestor": {tc.ancestor}}) {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Equal(names, tc.want) {
			t.Errorf("ancestor=%s: %q, want %q", tc.ancestor, names, tc.want)
		}
	}
}

// TestNameAndIDFiltersAreRegexps: name= and id= filter values are unanchored
// regular expressions, as in Podman; an invalid one is a 400.
func TestNameAndIDFiltersAreRegexps(t *testing.T) {
	te := startEngine(t)
	keep := te.create(map[string]any{"name": "keep", "command": []string{"true"}})
	te.create(map[string]any{"name": "bekeeper", "command": []string{"true"}})
	for _, tc := range []struct {
		filter, value string
		want          []string
	}{
		{"name", "^ke", []string{"keep"}},
		{"name", "keep", []string{"bekeeper", "keep"}},
		{"name", "^keep$", []string{"keep"}},
		{"name", "p.r$", []string{"bekeeper"}},
		{"name", "^nothing", nil},
		{"id", "^" + keep[:12], []string{"keep"}},
		{"id", keep[3:20] + "$|^" + keep, []string{"keep"}},
	} {
		var names []string
		for n := range te.psImages(map[string][]string{tc.filter: {tc.value}}) {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s=%s: %q, want %q", tc.filter, tc.value, names, tc.want)
		}
	}
	data, _ := json.Marshal(map[string][]string{"name": {"(ke"}})
	if status, body := te.Do("GET", "/containers/json?all=true&filters="+url.QueryEscape(string(data)), nil); status != http.StatusBadRequest {
		t.Errorf("name=(ke: %d %s, want 400", status, body)
	}
}

// TestRemoveRunningWithoutForce: removing a running container without force
// is a 409 whose message ends in Podman's "container state improper" (the
// podman client's exit code 2 depends on it), and the container stays.
func TestRemoveRunningWithoutForce(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"name": "busy", "command": []string{"sleep", "60"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	status, body := te.Do("DELETE", "/containers/busy", nil)
	var e struct {
		Cause    string `json:"cause"`
		Message  string `json:"message"`
		Response int    `json:"response"`
	}
	json.Unmarshal(body, &e)
	want := "cannot remove container " + id + " as it is running - running or paused containers cannot be removed without force: container state improper"
	if status != http.StatusConflict || e.Message != want || e.Cause != "container state improper" || e.Response != 409 {
		t.Fatalf("rm running: %d %s, want 409 with message %q", status, body, want)
	}
	if d := te.inspect(id); d.State.Status != "running" {
		t.Fatalf("after refused rm: %+v", d.State)
	}
}

// TestHostNetworkHostname: with the host's network a container is named like
// the host (as Podman does), unless the request gives a hostname.
func TestHostNetworkHostname(t *testing.T) {
	te := startEngine(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	script := "hostname; cat /etc/hostname; echo $HOSTNAME"
	code, out := te.run(map[string]any{"command": []string{"sh", "-c", script}, "netns": map[string]string{"nsmode": "host"}})
	if want := []string{host, host, host}; code != 0 || !slices.Equal(out, want) {
		t.Errorf("netns host: exit %d, output %q, want %q", code, out, want)
	}
	code, out = te.run(map[string]any{"command": []string{"sh", "-c", script}, "netns": map[string]string{"nsmode": "host"}, "hostname": "given"})
	if want := []string{"given", "given", "given"}; code != 0 || !slices.Equal(out, want) {
		t.Errorf("netns host with hostname: exit %d, output %q, want %q", code, out, want)
	}
	id := te.create(map[string]any{"command": []string{"true"}, "netns": map[string]string{"nsmode": "host"}})
	var d struct{ Config struct{ Hostname string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	if d.Config.Hostname != host {
		t.Errorf("inspect Config.Hostname %q, want %q", d.Config.Hostname, host)
	}
}
