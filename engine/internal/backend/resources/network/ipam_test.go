package network

import (
	"encoding/json"
	"errors"
	"net"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

func subnetOf(t *testing.T, cidr string) core.Subnet {
	t.Helper()
	n, err := core.ParseIPNet(cidr)
	if err != nil {
		t.Fatal(err)
	}
	return core.Subnet{Subnet: n}
}

func TestValidateSubnet(t *testing.T) {
	for _, tc := range []struct {
		cidr, gateway, start, end string
		wantGateway               string
		field                     string
	}{
		{cidr: "10.1.2.0/24", wantGateway: "10.1.2.1"},
		{cidr: "10.1.2.0/24", gateway: "10.1.2.254", wantGateway: "10.1.2.254"},
		{cidr: "10.1.2.0/30", wantGateway: "10.1.2.1"},
		{cidr: "fd00:1::/64", wantGateway: "fd00:1::1"},
		{cidr: "10.1.2.0/31", field: "subnets"},
		{cidr: "10.1.2.0/32", field: "subnets"},
		{cidr: "10.1.2.5/24", field: "subnets"},
		{cidr: "10.1.2.0/24", gateway: "10.1.3.1", field: "gateway"},
		{cidr: "10.1.2.0/24", gateway: "10.1.2.0", field: "gateway"},
		{cidr: "10.1.2.0/24", gateway: "10.1.2.255", field: "gateway"},
		{cidr: "10.1.2.0/24", start: "10.1.3.1", field: "lease_range"},
		{cidr: "10.1.2.0/24", end: "10.1.3.1", field: "lease_range"},
		{cidr: "10.1.2.0/24", start: "10.1.2.100", end: "10.1.2.50", field: "lease_range"},
	} {
		s := subnetOf(t, tc.cidr)
		if tc.gateway != "" {
			s.Gateway = net.ParseIP(tc.gateway)
		}
		if tc.start != "" || tc.end != "" {
			s.LeaseRange = &core.LeaseRange{StartIP: net.ParseIP(tc.start), EndIP: net.ParseIP(tc.end)}
		}
		err := validateSubnet(&s, "subnets")
		if tc.field != "" {
			var fe *core.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("%+v: %v, want an error naming %s", tc, err, tc.field)
			}
			continue
		}
		if err != nil || s.Gateway.String() != tc.wantGateway {
			t.Errorf("%+v: gateway %s, err %v", tc, s.Gateway, err)
		}
	}
}

// TestPickAddressAfterTheLast: as Podman's IPAM, the pool hands out the
// first free address after the one it handed out last, wrapping around, so
// that an address just released (a stopped or checkpointed container's) is
// not the next one handed out.
func TestPickAddressAfterTheLast(t *testing.T) {
	s := subnetOf(t, "10.1.2.0/29") // hosts .2 to .6 (.1 the gateway)
	if err := validateSubnet(&s, "subnets"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		used       []string
		last, want string
	}{
		{nil, "", "10.1.2.2"},
		{nil, "10.1.2.2", "10.1.2.3"},
		// .2 released after .3 went out: .4 next, not .2.
		{[]string{"10.1.2.3"}, "10.1.2.3", "10.1.2.4"},
		{[]string{"10.1.2.4", "10.1.2.5"}, "10.1.2.3", "10.1.2.6"},
		// At the end of the range, round to its start.
		{nil, "10.1.2.6", "10.1.2.2"},
		{[]string{"10.1.2.2", "10.1.2.3"}, "10.1.2.6", "10.1.2.4"},
		{[]string{"10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.6"}, "10.1.2.4", "10.1.2.5"},
		// A last address outside the range (the range changed) is ignored.
		{nil, "10.9.9.9", "10.1.2.2"},
	} {
		used := map[string]bool{}
		for _, u := range tc.used {
			used[u] = true
		}
		ip, err := pickAddress(s, used, net.ParseIP(tc.last))
		if err != nil || ip.String() != tc.want {
			t.Errorf("used %v, last %q: %v %v, want %s", tc.used, tc.last, ip, err, tc.want)
		}
	}
	full := map[string]bool{"10.1.2.2": true, "10.1.2.3": true, "10.1.2.4": true, "10.1.2.5": true, "10.1.2.6": true}
	for _, last := range []string{"", "10.1.2.2", "10.1.2.6"} {
		if ip, err := pickAddress(s, full, net.ParseIP(last)); !errors.Is(err, core.ErrAddressInUse) {
			t.Errorf("full range, last %q: %v %v", last, ip, err)
		}
	}
	// A lease range wraps within itself.
	lr := subnetOf(t, "10.1.2.0/24")
	lr.LeaseRange = &core.LeaseRange{StartIP: net.ParseIP("10.1.2.100").To4(), EndIP: net.ParseIP("10.1.2.102").To4()}
	validateSubnet(&lr, "subnets")
	if ip, _ := pickAddress(lr, map[string]bool{"10.1.2.100": true}, net.ParseIP("10.1.2.102")); ip.String() != "10.1.2.101" {
		t.Errorf("lease range wrap: %s", ip)
	}
	// IPv6: the walk stays bounded in a /64.
	v6 := subnetOf(t, "fd00:1::/64")
	validateSubnet(&v6, "subnets")
	if ip, err := pickAddress(v6, map[string]bool{"fd00:1::3": true}, net.ParseIP("fd00:1::2")); err != nil || ip.String() != "fd00:1::4" {
		t.Errorf("v6: %v %v", ip, err)
	}
}

func TestPickAddress(t *testing.T) {
	s := subnetOf(t, "10.1.2.0/29")
	if err := validateSubnet(&s, "subnets"); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var got []string
	for {
		ip, err := pickAddress(s, used, nil)
		if err != nil {
			if !errors.Is(err, core.ErrAddressInUse) {
				t.Fatal(err)
			}
			break
		}
		used[ip.String()] = true
		got = append(got, ip.String())
	}
	// .0 network, .1 gateway, .7 broadcast are never handed out.
	want := []string{"10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"}
	if len(got) != len(want) {
		t.Fatalf("picked %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("picked %v, want %v", got, want)
		}
	}
	lr := subnetOf(t, "10.1.2.0/24")
	lr.LeaseRange = &core.LeaseRange{StartIP: net.ParseIP("10.1.2.100").To4(), EndIP: net.ParseIP("10.1.2.101").To4()}
	validateSubnet(&lr, "subnets")
	ip, _ := pickAddress(lr, map[string]bool{"10.1.2.100": true}, nil)
	if ip.String() != "10.1.2.101" {
		t.Fatalf("lease range: %s", ip)
	}
	if _, err := pickAddress(lr, map[string]bool{"10.1.2.100": true, "10.1.2.101": true}, nil); !errors.Is(err, core.ErrAddressInUse) {
		t.Fatalf("exhausted lease range: %v", err)
	}
}

func TestPoolSubnets(t *testing.T) {
	_, pool, _ := net.ParseCIDR("10.89.0.0/22")
	var got []string
	poolSubnets(pool, 24, func(n *net.IPNet) bool {
		got = append(got, n.String())
		return true
	})
	want := "10.89.0.0/24 10.89.1.0/24 10.89.2.0/24 10.89.3.0/24"
	if s := joinStrings(got); s != want {
		t.Fatalf("pool: %s, want %s", s, want)
	}
}

func joinStrings(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		opts, ipam map[string]string
		subnets    bool
		field      string
	}{
		{opts: map[string]string{"mtu": "1500", "metric": "10", "isolate": "true"}},
		{ipam: map[string]string{"driver": "none"}},
		{opts: map[string]string{"mtu": "9x"}, field: "options"},
		{opts: map[string]string{"mtu": "20"}, field: "options"},
		{opts: map[string]string{"isolate": "strict"}, field: "options"},
		{opts: map[string]string{"vlan": "5"}, field: "options"},
		{opts: map[string]string{"mode": "x"}, field: "options"},
		{ipam: map[string]string{"driver": "dhcp"}, field: "ipam_options"},
		{ipam: map[string]string{"driver": "none"}, subnets: true, field: "ipam_options"},
		{ipam: map[string]string{"range": "x"}, field: "ipam_options"},
	} {
		req := core.Network{Options: tc.opts, IPAMOptions: tc.ipam}
		if tc.subnets {
			req.Subnets = []core.Subnet{subnetOf(t, "10.1.2.0/24")}
		}
		err := checkOptions(&req)
		var fe *core.FieldError
		if tc.field == "" && err != nil || tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("%+v: %v, want field %q", tc, err, tc.field)
		}
	}
}

// FuzzNetworkRequest feeds arbitrary create bodies through decoding and
// every validation a create runs before it touches state: nothing panics,
// and an accepted subnet always has its gateway inside it.
func FuzzNetworkRequest(f *testing.F) {
	f.Add(`{"name":"a","subnets":[{"subnet":"10.1.2.0/24","gateway":"10.1.2.1","lease_range":{"start_ip":"10.1.2.10","end_ip":"10.1.2.20"}}]}`)
	f.Add(`{"subnets":[{"subnet":"fd00::/64"}],"options":{"mtu":"1500"},"ipam_options":{"driver":"none"}}`)
	f.Add(`{"subnets":[{"subnet":"10.0.0.0/31"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req core.Network
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		if checkOptions(&req) != nil {
			return
		}
		for i := range req.Subnets {
			s := &req.Subnets[i]
			if validateSubnet(s, "subnets") != nil {
				return
			}
			if !s.Subnet.Contains(s.Gateway) {
				t.Fatalf("accepted gateway %s outside %s", s.Gateway, &s.Subnet.IPNet)
			}
			if ip, err := pickAddress(*s, map[string]bool{}, nil); err == nil && !s.Subnet.Contains(ip) {
				t.Fatalf("picked %s outside %s", ip, &s.Subnet.IPNet)
			}
		}
	})
}
