package containers_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestPIDAndUTSJoined: pidns and utsns container:NAME put a container in
// NAME's PID and UTS namespaces: it sees NAME's process as PID 1 and has
// NAME's hostname; NAME is its dependency (started with it, listed in
// Dependencies) and inspect names it; the joiner ends when NAME's init
// does. An unknown donor, a hostname with a joined UTS namespace and a
// mode without a container are 400s naming the member.
func TestPIDAndUTSJoined(t *testing.T) {
	te := startEngine(t)
	te.loadBusybox()
	donor := te.create(map[string]any{"name": "pdonor", "hostname": "donorhost", "command": []string{"sleep", "600"}})
	joiner := te.create(map[string]any{"name": "pjoiner",
		"pidns": map[string]string{"nsmode": "container", "value": "pdonor"}, "utsns": map[string]string{"nsmode": "container", "value": "pdonor"},
		"command": []string{"sh", "-c", "hostname; cat /proc/1/comm; exec sleep 600"}})
	te.Must(http.StatusNoContent, "POST", "/containers/pjoiner/start", nil)
	if st := te.inspect(donor).State.Status; st != "running" {
		t.Fatalf("starting the joiner left its donor %s", st)
	}
	lines := te.waitLog(joiner, 2)
	if lines[0] != "donorhost" || lines[1] != "sleep" {
		t.Errorf("the joiner's hostname and PID 1: %q, want donorhost and the donor's sleep", lines)
	}
	var c struct {
		HostConfig   struct{ PidMode, UTSMode string }
		Dependencies []string
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/pjoiner/json", nil), &c)
	if c.HostConfig.PidMode != "container:"+donor || c.HostConfig.UTSMode != "container:"+donor || strings.Join(c.Dependencies, ",") != donor {
		t.Errorf("inspect: %+v", c)
	}
	// ns:PATH joins the namespaces a path names (the donor's here).
	nsPath := func(kind string) map[string]string {
		return map[string]string{"nsmode": "path", "value": "/proc/" + strconv.Itoa(te.inspect(donor).State.Pid) + "/ns/" + kind}
	}
	pathJoiner := te.create(map[string]any{"name": "ppath", "pidns": nsPath("pid"), "utsns": nsPath("uts"), "ipcns": nsPath("ipc"),
		"command": []string{"sh", "-c", "hostname; cat /proc/1/comm; exec sleep 600"}})
	te.Must(http.StatusNoContent, "POST", "/containers/ppath/start", nil)
	if lines := te.waitLog(pathJoiner, 2); lines[0] != "donorhost" || lines[1] != "sleep" {
		t.Errorf("joined by path: %q", lines)
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/ppath/json", nil), &c)
	if c.HostConfig.PidMode != "ns:"+nsPath("pid")["value"] {
		t.Errorf("inspect PidMode %q", c.HostConfig.PidMode)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/ppath?force=true&timeout=0", nil)
	for _, bad := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"ipcns": map[string]string{"nsmode": "path", "value": "/proc/no-such/ns/ipc"}}, "ipcns"},
		{map[string]any{"utsns": map[string]string{"nsmode": "path", "value": "relative"}}, "utsns"},
		{map[string]any{"pidns": map[string]string{"nsmode": "container", "value": "nosuch"}}, "pidns"},
		{map[string]any{"utsns": map[string]string{"nsmode": "container", "value": "pdonor"}, "hostname": "mine"}, "hostname"},
		{map[string]any{"utsns": map[string]string{"nsmode": "container"}}, "utsns"},
		{map[string]any{"pidns": map[string]string{"nsmode": "bogus", "value": "/proc/1/ns/pid"}}, "pidns"},
	} {
		bad.spec["image"], bad.spec["name"] = "busybox", "refused-ns"
		if status, body := te.Do("POST", "/containers/create", bad.spec); status != http.StatusBadRequest || !strings.Contains(string(body), bad.want) {
			t.Errorf("create %v: %d %s, want a 400 naming %s", bad.spec, status, body, bad.want)
		}
	}
	// The PID namespace's init goes, and the joiner with it.
	te.Must(http.StatusNoContent, "POST", "/containers/pdonor/stop?timeout=0", nil)
	poll.Until(t, 10*time.Second, "the joiner ended with its donor's init", func() bool {
		return te.inspect(joiner).State.Status == "exited"
	})
	te.Must(http.StatusOK, "DELETE", "/containers/pjoiner", nil)
	te.Must(http.StatusOK, "DELETE", "/containers/pdonor", nil)
}
