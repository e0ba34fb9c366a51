package networksapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestNetworkOrder: Podman 6's networkOrder numbers a container's
// interfaces in the order it lists (eth0 the first), where the names'
// order would put them the other way round; "default" names the default
// network; a list that does not match the networks is a 400 naming it.
func TestNetworkOrder(t *testing.T) {
	te := startEngine(t)
	zSubnet, zPrefix := poolSubnet(te, 8)
	aSubnet, aPrefix := poolSubnet(te, 9)
	te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "zeta", "subnets": []map[string]any{{"subnet": zSubnet}}})
	te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "alpha", "subnets": []map[string]any{{"subnet": aSubnet}}})

	id := te.Create(map[string]any{"image": "localhost/busybox", "command": []string{"sleep", "300"},
		"Networks":     map[string]any{"alpha": map[string]any{}, "zeta": map[string]any{}, "default": map[string]any{}},
		"networkOrder": []string{"zeta", "default", "alpha"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	for iface, want := range map[string]string{"eth0": "inet " + zPrefix, "eth1": "inet " + strings.TrimSuffix(te.Nets.DefaultSubnet, "0/24"), "eth2": "inet " + aPrefix} {
		if code, out := te.exec(id, "ip", "-o", "-4", "addr", "show", iface); code != 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, %q; want %q", iface, code, out, want)
		}
	}

	for _, order := range [][]string{{"zeta"}, {"zeta", "nosuch"}, {"zeta", "zeta"}} {
		status, body := te.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox",
			"Networks": map[string]any{"alpha": map[string]any{}, "zeta": map[string]any{}}, "networkOrder": order})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "networkOrder") {
			t.Errorf("networkOrder %v: %d %s, want a 400 naming networkOrder", order, status, body)
		}
	}
	status, body := te.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox",
		"netns": map[string]any{"nsmode": "host"}, "networkOrder": []string{"zeta"}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "networkOrder") {
		t.Errorf("networkOrder without networks: %d %s", status, body)
	}
}

// TestNetworkRoutesRefused: Podman 5 and 6's network create --route sends
// routes, which netavark 1.4 cannot set up: a 400 that says so, and no
// network made.
func TestNetworkRoutesRefused(t *testing.T) {
	te := startEngine(t)
	subnet, prefix := poolSubnet(te, 10)
	status, body := te.Do("POST", "/networks/create", map[string]any{"name": "routed", "subnets": []map[string]any{{"subnet": subnet}},
		"routes": []map[string]any{{"destination": "10.200.0.0/16", "gateway": prefix + "2"}}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "routes") || !strings.Contains(string(body), "static routes") {
		t.Errorf("network create with routes: %d %s", status, body)
	}
	te.Must(http.StatusNotFound, "GET", "/networks/routed/json", nil)
}
