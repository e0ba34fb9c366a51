package dockerapi

import (
	"reflect"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/events"
)

// TestDockerEventAttributes: each kind of engine event reaches the Docker
// API with dockerd's actor and attributes (as dockerd 20-29 send them: a
// die's exitCode, a connect about the network with the container as an
// attribute, a volume's driver), without Podman's containerExitCode and
// podId, and with the deprecated status/id/from on containers and images
// only.
func TestDockerEventAttributes(t *testing.T) {
	at := time.Unix(1700000000, 5)
	ran := int64(7)
	for _, tt := range []struct {
		name         string
		in           events.Event
		id, action   string
		attrs        map[string]string
		status, from string
	}{
		{"died", events.Event{Type: "container", Status: "died", ID: "c1", Name: "web", Image: "busybox", ExitCode: 3, RunSeconds: &ran,
			Attributes: map[string]string{"podId": "p1", "lab": "v"}},
			"c1", "die", map[string]string{"exitCode": "3", "execDuration": "7", "image": "busybox", "name": "web", "lab": "v"}, "die", "busybox"},
		{"start", events.Event{Type: "container", Status: "start", ID: "c1", Name: "web", Image: "busybox", Attributes: map[string]string{}},
			"c1", "start", map[string]string{"image": "busybox", "name": "web"}, "start", "busybox"},
		{"kill", events.Event{Type: "container", Status: "kill", ID: "c1", Name: "web", Image: "busybox", Attributes: map[string]string{"signal": "15"}},
			"c1", "kill", map[string]string{"image": "busybox", "name": "web", "signal": "15"}, "kill", "busybox"},
		{"exec", events.Event{Type: "container", Status: "exec", ID: "c1", Name: "web", Image: "busybox", Command: "sh -c true",
			Attributes: map[string]string{"execID": "e1"}},
			"c1", "exec_start: sh -c true", map[string]string{"execID": "e1", "image": "busybox", "name": "web"}, "exec_start: sh -c true", "busybox"},
		{"exec died", events.Event{Type: "container", Status: "exec_died", ID: "c1", Name: "web", Image: "busybox", ExitCode: 5,
			Attributes: map[string]string{"execID": "e1"}},
			"c1", "exec_die", map[string]string{"execID": "e1", "exitCode": "5", "image": "busybox", "name": "web"}, "exec_die", "busybox"},
		{"connect", events.Event{Type: "network", Status: "connect", ID: "c1", Name: "web", NetworkID: "n1", Driver: "bridge",
			Attributes: map[string]string{"network": "front"}},
			"n1", "connect", map[string]string{"container": "c1", "name": "front", "type": "bridge"}, "", ""},
		{"network remove", events.Event{Type: "network", Status: "remove", ID: "n1", Name: "front", NetworkID: "n1", Driver: "macvlan",
			Attributes: map[string]string{"network": "front"}},
			"n1", "destroy", map[string]string{"name": "front", "type": "macvlan"}, "", ""},
		{"volume", events.Event{Type: "volume", Status: "create", ID: "data", Name: "data", Driver: "local", Attributes: map[string]string{}},
			"data", "create", map[string]string{"driver": "local"}, "", ""},
		{"image", events.Event{Type: "image", Status: "tag", ID: "sha1", Name: "localhost/x:1", Attributes: map[string]string{}},
			"sha1", "tag", map[string]string{"name": "localhost/x:1"}, "tag", ""},
	} {
		tt.in.Time = at
		got, ok := dockerEvent(tt.in)
		if !ok {
			t.Errorf("%s: no Docker event", tt.name)
			continue
		}
		if got.Actor.ID != tt.id || string(got.Action) != tt.action || !reflect.DeepEqual(got.Actor.Attributes, tt.attrs) {
			t.Errorf("%s: actor %s action %q attributes %v, want %s %q %v", tt.name, got.Actor.ID, got.Action, got.Actor.Attributes, tt.id, tt.action, tt.attrs)
		}
		if got.Status != tt.status || got.From != tt.from || (tt.status != "" && got.ID != tt.id) || (tt.status == "" && got.ID != "") {
			t.Errorf("%s: status %q id %q from %q, want %q %q %q", tt.name, got.Status, got.ID, got.From, tt.status, tt.id, tt.from)
		}
		if got.Type != "container" && got.Type != "network" && got.Type != "volume" && got.Type != "image" || got.Scope != "local" || got.TimeNano != at.UnixNano() {
			t.Errorf("%s: %+v", tt.name, got)
		}
	}
	if got := engineAction("exec_start: sh -c true"); got != "exec" {
		t.Errorf("filter exec_start: %q", got)
	}
	if got := engineAction("exec_die"); got != "exec_died" {
		t.Errorf("filter exec_die: %q", got)
	}
}
