package compatapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestWaitAfterRemoval: as Podman 5 does, the exit code of a removed
// container stays for a wait without conditions on its full ID (podman run
// --rm racing its auto-removal), across a kill -9 of the engine too; a wait
// with conditions, by a short ID, or on a container that never ran answers
// Podman's 404.
func TestWaitAfterRemoval(t *testing.T) {
	p := enginetest.StartProcess(t, enginetest.Options{What: "libpod compatibility tests"})
	id := p.Create(map[string]any{"command": []string{"sh", "-c", "exit 3"}, "remove": true})
	p.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := p.Wait(id); code != 3 {
		t.Fatalf("wait racing the removal: %d, want 3", code)
	}
	poll.Until(t, 10*time.Second, "the --rm container removed", func() bool {
		status, _ := p.Do("GET", "/containers/"+id+"/exists", nil)
		return status == http.StatusNotFound
	})
	if code := p.Wait(id); code != 3 {
		t.Fatalf("wait after the removal: %d, want 3", code)
	}
	notFound := func(path, name string) {
		t.Helper()
		e := decodeError(t, p.Must(http.StatusNotFound, "POST", path, nil))
		if want := `no container with name or ID "` + name + `" found: no such container`; e.Cause != "no such container" || e.Message != want {
			t.Fatalf("%s: %+v, want cause \"no such container\" and message %q", path, e, want)
		}
	}
	notFound("/containers/"+id+"/wait?condition=stopped", id)
	notFound("/containers/"+id[:12]+"/wait", id[:12])
	never := p.Create(map[string]any{"command": []string{"true"}})
	p.Must(http.StatusOK, "DELETE", "/containers/"+never, nil)
	notFound("/containers/"+never+"/wait", never)
	podmanFails(t, p.Engine, 125, `no container with name or ID "`+id+`" found: no such container`, "wait", id)

	p.Kill9()
	p.Start()
	if code := p.Wait(id); code != 3 {
		t.Fatalf("wait after a kill -9 of the engine: %d, want 3", code)
	}
	podmanFails(t, p.Engine, 5, "", "run", "--rm", "localhost/busybox:latest", "sh", "-c", "exit 5")
}

// TestCommitJSONConfig: Podman 5's commit sends the configuration to merge
// as a JSON body beside the query parameters; the changes still apply over
// it, and what an image cannot keep, or a body that is not JSON, is a 400
// naming it.
func TestCommitJSONConfig(t *testing.T) {
	te := startEngine(t)
	id := te.Create(map[string]any{"command": []string{"true"}, "env": map[string]string{"FROM_CTR": "1"}})
	body := map[string]any{
		"Env": []string{"A=1", "FROM_CTR=2"}, "Labels": map[string]string{"x": "y"}, "Cmd": []string{"sh", "-c", "echo hi"},
		"ExposedPorts": map[string]any{"80/tcp": map[string]any{}}, "WorkingDir": "/tmp", "User": "1:1",
		"Entrypoint": []string{"/bin/sh"}, "StopSignal": "SIGUSR1",
	}
	te.Must(http.StatusOK, "POST", "/commit?container="+id+"&repo=localhost/committed&tag=one&changes=LABEL%20z%3Dw&changes=USER%202", body)
	var img struct {
		Config struct {
			User, WorkingDir, StopSignal string
			Env, Cmd, Entrypoint         []string
			Labels                       map[string]string
			ExposedPorts                 map[string]any
		}
	}
	te.Get("/images/localhost/committed:one/json", &img)
	c := img.Config
	if c.User != "2" || c.WorkingDir != "/tmp" || c.StopSignal != "SIGUSR1" || strings.Join(c.Cmd, " ") != "sh -c echo hi" ||
		strings.Join(c.Entrypoint, " ") != "/bin/sh" || c.Labels["x"] != "y" || c.Labels["z"] != "w" || c.ExposedPorts["80/tcp"] == nil {
		t.Fatalf("committed configuration %+v", c)
	}
	env := strings.Join(c.Env, " ")
	if !strings.Contains(env, "A=1") || !strings.Contains(env, "FROM_CTR=2") || strings.Contains(env, "FROM_CTR=1") {
		t.Fatalf("committed environment %q: want A=1 and FROM_CTR=2 (the body's over the container's)", c.Env)
	}
	var docker struct {
		Healthcheck struct{ Test []string }
	}
	te.Must(http.StatusOK, "POST", "/commit?container="+id+"&repo=localhost/committed&tag=two&format=docker",
		map[string]any{"Healthcheck": map[string]any{"Test": []string{"CMD", "true"}}})
	te.Get("/images/localhost/committed:two/json", &docker)
	if strings.Join(docker.Healthcheck.Test, " ") != "CMD true" {
		t.Fatalf("docker-format commit kept health check %q", docker.Healthcheck.Test)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"Env":[`, "invalid body"},
		{`{"Env":"A=1"}`, "invalid Env"},
		{`{"Env":["NOVALUE"]}`, "invalid config.Env"},
		{`{"Tty":true}`, "invalid config.Tty"},
		{`{"Healthcheck":{"Test":["CMD","true"]}}`, "invalid config.Healthcheck"},
		{`{"Entrypointt":["sh"]}`, "invalid Entrypointt"},
	} {
		status, answer := te.Raw("POST", "/commit?container="+id+"&repo=localhost/committed&tag=bad", "application/json", strings.NewReader(bad.body))
		if status != http.StatusBadRequest || !strings.Contains(decodeError(t, answer).Message, bad.field) {
			t.Fatalf("commit with %s: %d %s; want 400 naming %q", bad.body, status, answer, bad.field)
		}
	}
	te.Must(http.StatusNotFound, "GET", "/images/localhost/committed:bad/exists", nil)
}

// TestInspectPodmanAnnotations: as Podman 5 writes them into the OCI
// configuration, a privileged, --rm or --init container shows
// io.podman.annotations.privileged (autoremove, init) = "TRUE" in inspect.
func TestInspectPodmanAnnotations(t *testing.T) {
	te := startEngine(t)
	annotations := func(id string) map[string]string {
		t.Helper()
		var data struct {
			Config     struct{ Annotations map[string]string }
			HostConfig struct{ Annotations map[string]string }
		}
		te.Get("/containers/"+id+"/json", &data)
		if len(data.Config.Annotations) != len(data.HostConfig.Annotations) {
			t.Fatalf("Config.Annotations %v but HostConfig.Annotations %v", data.Config.Annotations, data.HostConfig.Annotations)
		}
		return data.Config.Annotations
	}
	priv := annotations(te.Create(map[string]any{"command": []string{"true"}, "privileged": true}))
	if priv["io.podman.annotations.privileged"] != "TRUE" {
		t.Fatalf("privileged container's annotations %v", priv)
	}
	rm := annotations(te.Create(map[string]any{"command": []string{"true"}, "remove": true, "init": true}))
	if rm["io.podman.annotations.autoremove"] != "TRUE" || rm["io.podman.annotations.init"] != "TRUE" || rm["io.podman.annotations.privileged"] != "" {
		t.Fatalf("--rm --init container's annotations %v", rm)
	}
	plain := annotations(te.Create(map[string]any{"command": []string{"true"}, "annotations": map[string]string{"a": "b"}}))
	if plain["a"] != "b" || plain["io.podman.annotations.privileged"] != "" {
		t.Fatalf("plain container's annotations %v", plain)
	}
	te.MustPodman("create", "--privileged", "--name", "priv", "localhost/busybox:latest", "true")
	if out := te.MustPodman("inspect", "--format", `{{index .Config.Annotations "io.podman.annotations.privileged"}}`, "priv"); strings.TrimSpace(out) != "TRUE" {
		t.Fatalf("podman inspect: %q", out)
	}
}

// TestStatsCarryContainerID: both libpod stats routes name the container
// by its full ID in each entry; stats of every container list the running
// ones, newest first.
func TestStatsCarryContainerID(t *testing.T) {
	te := startEngine(t)
	id := te.Create(map[string]any{"command": []string{"sleep", "60"}, "name": "busy"})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	for _, path := range []string{"/containers/stats?stream=false", "/containers/stats?stream=false&containers=busy"} {
		var report struct {
			Stats []struct{ ContainerID, Name string }
		}
		te.Get(path, &report)
		if len(report.Stats) != 1 || report.Stats[0].ContainerID != id || report.Stats[0].Name != "busy" {
			t.Fatalf("%s: %+v, want one entry with ContainerID %s", path, report.Stats, id)
		}
	}
	// Every container's stats: the running ones only, newest first.
	te.Create(map[string]any{"command": []string{"true"}, "name": "created"})
	exited := te.Create(map[string]any{"command": []string{"true"}, "name": "exited"})
	te.Must(http.StatusNoContent, "POST", "/containers/"+exited+"/start", nil)
	te.Must(http.StatusOK, "POST", "/containers/"+exited+"/wait", nil)
	second := te.Create(map[string]any{"command": []string{"sleep", "60"}, "name": "busy2"})
	te.Must(http.StatusNoContent, "POST", "/containers/"+second+"/start", nil)
	var all struct {
		Stats []struct{ ContainerID string }
	}
	te.Get("/containers/stats?stream=false", &all)
	if len(all.Stats) != 2 || all.Stats[0].ContainerID != second || all.Stats[1].ContainerID != id {
		t.Fatalf("stats of every container: %+v, want %s then %s", all.Stats, second, id)
	}
	var one struct{ ID, Name string }
	if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/busy/stats?stream=false", nil), &one); err != nil || one.ID != id {
		t.Fatalf("per-container stats: %+v (%v), want id %s", one, err, id)
	}
	if out := te.MustPodman("stats", "--no-stream", "--format", "{{.ID}}", "busy"); strings.TrimSpace(out) != id[:12] {
		t.Fatalf("podman stats: %q", out)
	}
}
