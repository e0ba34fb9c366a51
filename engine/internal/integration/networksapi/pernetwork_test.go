package networksapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestPodmanPerNetworkOptions: what podman 4.3.1 sends for --network
// NAME:ip=...,mac=...,alias=...,interface_name=... (specgen's Networks
// map) is honoured: the address, MAC and interface name inside the
// container, the alias resolved by aardvark-dns; a bad address, one outside
// the network's subnets and one taken are refused naming the address.
// Also: the answer to a taken network name (409, cause "network already
// exists", as Podman's) and prune with label and until filters.
func TestPodmanPerNetworkOptions(t *testing.T) {
	enginetest.RequirePodman(t)
	te := startEngine(t)
	subnet, prefix := poolSubnet(te, 7)
	te.MustPodman("network", "create", "--subnet", subnet, "pernet")

	te.MustPodman("run", "-d", "--name", "p1", "--network",
		"pernet:ip="+prefix+"9,mac=02:00:00:00:07:09,alias=backend,interface_name=net7", "localhost/busybox", "sleep", "300")
	if out := te.MustPodman("exec", "p1", "ip", "addr", "show", "net7"); !strings.Contains(out, "inet "+prefix+"9/24") || !strings.Contains(out, "02:00:00:00:07:09") {
		t.Fatalf("p1's net7: %s", out)
	}
	if out := te.MustPodman("run", "--rm", "--network", "pernet", "localhost/busybox", "nslookup", "backend"); !strings.Contains(out, "Address: "+prefix+"9") {
		t.Fatalf("nslookup of the alias: %s", out)
	}
	if out := te.MustPodman("inspect", "p1", "--format", `{{(index .NetworkSettings.Networks "pernet").IPAddress}} {{(index .NetworkSettings.Networks "pernet").MacAddress}} {{(index .NetworkSettings.Networks "pernet").Aliases}}`); !strings.Contains(out, prefix+"9 02:00:00:00:07:09") || !strings.Contains(out, "backend") {
		t.Fatalf("inspect of p1's network: %s", out)
	}
	for _, tc := range []struct{ network, want string }{
		{"pernet:ip=" + prefix + "300", prefix + "300"},
		{"pernet:ip=192.0.2.9", "192.0.2.9 is in no subnet"},
		{"pernet:ip=" + prefix + "9", "already in use"},
		{"pernet:mac=zz:zz", "zz:zz"},
		{"pernet:interface_name=bad/name", "bad/name"},
	} {
		out, err := te.Podman("run", "--rm", "--network", tc.network, "localhost/busybox", "true")
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--network %s: %v %s, want an error naming %q", tc.network, err, out, tc.want)
		}
	}
	// The same through the API: 4xx naming the member.
	for _, tc := range []struct {
		opts   map[string]any
		status int
		want   string
	}{
		{map[string]any{"static_ips": []string{"192.0.2.9"}}, http.StatusBadRequest, "static_ips"},
		{map[string]any{"static_ips": []string{"nope"}}, http.StatusBadRequest, "nope"},
		{map[string]any{"interface_name": "a/b"}, http.StatusBadRequest, "interface_name"},
	} {
		status, body := te.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox", "Networks": map[string]any{"pernet": tc.opts}})
		if status != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("create with %v: %d %s, want %d naming %q", tc.opts, status, body, tc.status, tc.want)
		}
	}

	// A taken name: Podman's status and words.
	status, body := te.Do("POST", "/networks/create", map[string]any{"name": "pernet"})
	var e struct{ Cause, Message string }
	json.Unmarshal(body, &e)
	if status != http.StatusConflict || e.Cause != "network already exists" || !strings.Contains(e.Message, "pernet") {
		t.Fatalf("create of a taken name: %d %s", status, body)
	}
	if out, err := te.Podman("network", "create", "pernet"); err == nil || !strings.Contains(out, "network already exists") {
		t.Fatalf("podman network create of a taken name: %v %s", err, out)
	}

	// Prune with label filters (label=k, label=k=v, label!=k=v) and until.
	te.MustPodman("network", "create", "--label", "env=dev", "pdev")
	te.MustPodman("network", "create", "--label", "env=prod", "pprod")
	te.MustPodman("network", "create", "--label", "team", "pteam")
	te.MustPodman("network", "create", "plain")
	prune := func(filter, want string) {
		t.Helper()
		out := te.MustPodman("network", "prune", "-f", "--filter", filter)
		if got := strings.Join(strings.Fields(out), " "); got != want {
			t.Fatalf("prune --filter %s removed %q, want %q", filter, got, want)
		}
	}
	prune("until=2000-01-01T00:00:00Z", "")
	prune("label=env=dev", "pdev")
	prune("label=team", "pteam")
	prune("label!=env=prod", "plain")
	prune("label=env", "pprod")
	// pernet is in use and the default network stays.
	if out := te.MustPodman("network", "ls", "--format", "{{.Name}}"); len(strings.Fields(out)) != 2 || !strings.Contains(out, "pernet\n") || !strings.Contains(out, te.Nets.DefaultNetwork+"\n") {
		t.Fatalf("networks after the prunes: %q", out)
	}
}
