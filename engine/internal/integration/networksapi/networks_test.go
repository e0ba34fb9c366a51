package networksapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

type network struct {
	Name             string            `json:"name"`
	ID               string            `json:"id"`
	Driver           string            `json:"driver"`
	NetworkInterface string            `json:"network_interface"`
	Internal         bool              `json:"internal"`
	DNSEnabled       bool              `json:"dns_enabled"`
	IPv6Enabled      bool              `json:"ipv6_enabled"`
	Labels           map[string]string `json:"labels"`
	Options          map[string]string `json:"options"`
	DNSServers       []string          `json:"network_dns_servers"`
	Subnets          []struct {
		Subnet     string `json:"subnet"`
		Gateway    string `json:"gateway"`
		LeaseRange *struct {
			StartIP string `json:"start_ip"`
			EndIP   string `json:"end_ip"`
		} `json:"lease_range"`
	} `json:"subnets"`
	Containers map[string]struct {
		Name string `json:"name"`
	} `json:"containers"`
}

// hostRoute answers the subnet of the interface the host's default route
// uses: a route that stays while the test runs (other tests' bridges come
// and go).
func hostRoute(t *testing.T) string {
	def, err := exec.Command("ip", "-4", "route", "show", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(def))
	for i := 0; i+1 < len(f); i++ {
		if f[i] != "dev" {
			continue
		}
		out, err := exec.Command("ip", "-4", "route", "show", "dev", f[i+1], "scope", "link").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if g := strings.Fields(line); len(g) > 0 && strings.Contains(g[0], "/") {
				return g[0]
			}
		}
	}
	t.Skip("the host has no default route with a link route to test against")
	return ""
}

func names(nets []network) []string {
	var out []string
	for _, n := range nets {
		out = append(out, n.Name)
	}
	return out
}

// TestNetworkRoutes covers the networks group without containers: the
// default network, create with every option, list filters, both inspect
// paths, exists, update, remove, prune, and the bad-input statuses.
func TestNetworkRoutes(t *testing.T) {
	te := startEngine(t)
	block := strings.TrimSuffix(te.Nets.SubnetPool[0], ".0/20")
	prefix := strings.Join(strings.Split(block, ".")[:2], ".")
	third := strings.Split(block, ".")[2]
	var thirdN int
	fmt.Sscan(third, &thirdN)
	sub := func(i int) string { return fmt.Sprintf("%s.%d.0/24", prefix, thirdN+i) }

	var def network
	jsonOf(t, te.Must(http.StatusOK, "GET", "/networks/"+te.Nets.DefaultNetwork+"/json", nil), &def)
	if def.NetworkInterface != te.Nets.DefaultBridge || def.Subnets[0].Subnet != te.Nets.DefaultSubnet || def.DNSEnabled {
		t.Fatalf("default network: %+v", def)
	}

	var a network
	jsonOf(t, te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{
		"name": "neta", "dns_enabled": true, "labels": map[string]string{"team": "x"},
		"options": map[string]string{"mtu": "1400", "isolate": "true"},
		"subnets": []map[string]any{{"subnet": sub(5), "gateway": fmt.Sprintf("%s.%d.254", prefix, thirdN+5),
			"lease_range": map[string]string{"start_ip": fmt.Sprintf("%s.%d.100", prefix, thirdN+5), "end_ip": fmt.Sprintf("%s.%d.110", prefix, thirdN+5)}}},
	}), &a)
	if a.ID == "" || !strings.HasPrefix(a.NetworkInterface, te.Nets.BridgePrefix) || a.Options["mtu"] != "1400" || a.Subnets[0].LeaseRange == nil {
		t.Fatalf("created network: %+v", a)
	}
	var b network
	jsonOf(t, te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "netb", "internal": true, "ipv6_enabled": true}), &b)
	if !b.Internal || !b.IPv6Enabled || len(b.Subnets) != 2 {
		t.Fatalf("dual stack network from the pool: %+v", b)
	}
	if !strings.HasPrefix(b.Subnets[0].Subnet, prefix+".") || !strings.HasPrefix(b.Subnets[1].Subnet, "fd") {
		t.Fatalf("subnets not from the pool / ULA: %+v", b.Subnets)
	}
	// ignoreIfExists answers the existing network.
	var again network
	jsonOf(t, te.Must(http.StatusOK, "POST", "/networks/create?ignoreIfExists=true", map[string]any{"name": "neta"}), &again)
	if again.ID != a.ID {
		t.Fatalf("ignoreIfExists answered %s, want %s", again.ID, a.ID)
	}

	for _, path := range []string{"/networks/neta/json", "/networks/neta", "/networks/" + a.ID[:12] + "/json"} {
		var got network
		jsonOf(t, te.Must(http.StatusOK, "GET", path, nil), &got)
		if got.ID != a.ID || got.Labels["team"] != "x" {
			t.Fatalf("GET %s: %+v", path, got)
		}
	}
	te.Must(http.StatusNoContent, "GET", "/networks/neta/exists", nil)
	body := te.Must(http.StatusNotFound, "GET", "/networks/nosuch/exists", nil)
	if !strings.Contains(string(body), `"response":404`) {
		t.Fatalf("exists 404 without the error body: %s", body)
	}

	list := func(filters string) []string {
		var nets []network
		jsonOf(t, te.Must(http.StatusOK, "GET", "/networks/json?filters="+filters, nil), &nets)
		return names(nets)
	}
	for _, tc := range []struct {
		filters string
		want    string
	}{
		{`{}`, "neta netb podman"},
		{`{"name":["neta"]}`, "neta"},
		{`{"name":["^net"]}`, "neta netb"},
		{`{"id":["` + a.ID[:10] + `"]}`, "neta"},
		{`{"driver":["bridge"]}`, "neta netb podman"},
		{`{"label":["team=x"]}`, "neta"},
		{`{"label":["team"]}`, "neta"},
		{`{"label!":["team"]}`, "netb podman"},
		{`{"until":["` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"]}`, "neta netb podman"},
		{`{"until":["2000-01-01"]}`, ""},
		{`{"dangling":["true"]}`, "neta netb podman"},
	} {
		if got := strings.Join(list(tc.filters), " "); got != tc.want {
			t.Errorf("filters %s: %q, want %q", tc.filters, got, tc.want)
		}
	}

	// Update: DNS servers added and removed.
	te.Must(http.StatusNoContent, "POST", "/networks/neta/update", map[string]any{"adddnsservers": []string{"192.0.2.53", "192.0.2.54"}})
	te.Must(http.StatusNoContent, "POST", "/networks/neta/update", map[string]any{"removednsservers": []string{"192.0.2.53"}})
	var upd network
	jsonOf(t, te.Must(http.StatusOK, "GET", "/networks/neta", nil), &upd)
	if strings.Join(upd.DNSServers, ",") != "192.0.2.54" {
		t.Fatalf("DNS servers after update: %v", upd.DNSServers)
	}

	bad := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		field  string
	}{
		{"subnet not CIDR", "POST", "/networks/create", `{"name":"x1","subnets":[{"subnet":"10.1.2.3"}]}`, 400, "subnet"},
		{"prefix out of range", "POST", "/networks/create", `{"name":"x1","subnets":[{"subnet":"10.1.2.0/33"}]}`, 400, "subnet"},
		{"prefix too long", "POST", "/networks/create", map[string]any{"name": "x1", "subnets": []map[string]any{{"subnet": fmt.Sprintf("%s.%d.0/31", prefix, thirdN+9)}}}, 400, "subnets"},
		{"not a network address", "POST", "/networks/create", map[string]any{"name": "x1", "subnets": []map[string]any{{"subnet": fmt.Sprintf("%s.%d.7/24", prefix, thirdN+9)}}}, 400, "subnets"},
		{"gateway outside", "POST", "/networks/create", map[string]any{"name": "x1", "subnets": []map[string]any{{"subnet": sub(9), "gateway": "192.0.2.1"}}}, 400, "gateway"},
		{"lease range outside", "POST", "/networks/create", map[string]any{"name": "x1", "subnets": []map[string]any{{"subnet": sub(9), "lease_range": map[string]string{"start_ip": "192.0.2.1"}}}}, 400, "lease_range"},
		{"name in use", "POST", "/networks/create", map[string]any{"name": "neta"}, 409, "network already exists"},
		{"overlapping subnet", "POST", "/networks/create", map[string]any{"name": "x1", "subnets": []map[string]any{{"subnet": sub(5)}}}, 409, ""},
		{"loopback", "POST", "/networks/create", map[string]any{"name": "x1", "subnets": []map[string]any{{"subnet": "127.0.0.0/8"}}}, 409, ""},
		{"host route", "POST", "/networks/create", map[string]any{"name": "x1", "subnets": []map[string]any{{"subnet": hostRoute(t)}}}, 409, ""},
		{"bad name", "POST", "/networks/create", map[string]any{"name": "a b"}, 400, "name"},
		{"mode as name", "POST", "/networks/create", map[string]any{"name": "host"}, 400, "name"},
		{"unknown driver", "POST", "/networks/create", map[string]any{"name": "x1", "driver": "ipvlan"}, 400, "driver"},
		{"unknown option", "POST", "/networks/create", map[string]any{"name": "x1", "options": map[string]string{"foo": "1"}}, 400, "options"},
		{"vlan", "POST", "/networks/create", map[string]any{"name": "x1", "options": map[string]string{"vlan": "5"}}, 400, "netavark"},
		{"bad mtu", "POST", "/networks/create", map[string]any{"name": "x1", "options": map[string]string{"mtu": "big"}}, 400, "options"},
		{"unknown ipam driver", "POST", "/networks/create", map[string]any{"name": "x1", "ipam_options": map[string]string{"driver": "dhcp"}}, 400, "ipam_options"},
		{"unknown member", "POST", "/networks/create", `{"name":"x1","colour":"red"}`, 400, "colour"},
		{"not JSON", "POST", "/networks/create", `{`, 400, "body"},
		{"inspect unknown", "GET", "/networks/nosuch/json", nil, 404, ""},
		{"remove unknown", "DELETE", "/networks/nosuch", nil, 404, ""},
		{"remove default", "DELETE", "/networks/" + te.Nets.DefaultNetwork, nil, 409, ""},
		{"bad timeout", "DELETE", "/networks/neta?timeout=soon", nil, 400, "timeout"},
		{"update unknown", "POST", "/networks/nosuch/update", map[string]any{"adddnsservers": []string{"192.0.2.1"}}, 404, ""},
		{"update bad server", "POST", "/networks/neta/update", map[string]any{"adddnsservers": []string{"nope"}}, 400, "adddnsservers"},
		{"update without DNS", "POST", "/networks/netb/update", map[string]any{"adddnsservers": []string{"192.0.2.1"}}, 400, "adddnsservers"},
		{"connect unknown network", "POST", "/networks/nosuch/connect", map[string]any{"container": "x"}, 404, ""},
		{"connect unknown container", "POST", "/networks/neta/connect", map[string]any{"container": "nosuch"}, 404, ""},
		{"connect without container", "POST", "/networks/neta/connect", map[string]any{}, 400, "container"},
		{"disconnect unknown container", "POST", "/networks/neta/disconnect", map[string]any{"Container": "nosuch"}, 404, ""},
		{"bad filter", "GET", `/networks/json?filters={"colour":["red"]}`, nil, 400, "filters"},
		{"bad until", "GET", `/networks/json?filters={"until":["later"]}`, nil, 400, "filters"},
		{"bad prune filter", "POST", `/networks/prune?filters={"name":["x"]}`, nil, 400, "filters"},
	}
	for _, tc := range bad {
		status, body := te.Do(tc.method, tc.path, tc.body)
		if status != tc.status {
			t.Errorf("%s: %d, want %d: %s", tc.name, status, tc.status, body)
			continue
		}
		var e struct {
			Cause, Message string
			Response       int
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Response != tc.status {
			t.Errorf("%s: error body %s", tc.name, body)
		}
		if tc.field != "" && !strings.Contains(e.Message, tc.field) {
			t.Errorf("%s: message %q does not name %s", tc.name, e.Message, tc.field)
		}
	}

	// Prune honours label filters and keeps the default network.
	var pruned []struct {
		Name  string
		Error *string
	}
	jsonOf(t, te.Must(http.StatusOK, "POST", `/networks/prune?filters={"label":["team=x"]}`, nil), &pruned)
	if len(pruned) != 1 || pruned[0].Name != "neta" {
		t.Fatalf("prune with label: %+v", pruned)
	}
	var removed []struct {
		Name string
		Err  *string
	}
	jsonOf(t, te.Must(http.StatusOK, "DELETE", "/networks/netb", nil), &removed)
	if len(removed) != 1 || removed[0].Name != "netb" || removed[0].Err != nil {
		t.Fatalf("remove report: %+v", removed)
	}
	if got := strings.Join(list(`{}`), " "); got != te.Nets.DefaultNetwork {
		t.Fatalf("networks left: %q", got)
	}
	// Events: create and remove were recorded.
	resp, err := te.Client.Get(te.URL + `/events?stream=false&filters={"type":["network"]}`)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`"Action":"create"`, `"Action":"remove"`} {
		if !strings.Contains(string(evs), want) {
			t.Errorf("network events lack %s: %s", want, evs)
		}
	}
}
