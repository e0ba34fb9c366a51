package network

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

func TestParseAardvarkVersion(t *testing.T) {
	for _, tc := range []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"aardvark-dns 1.4.0\n", 1, 4, true},
		{"aardvark-dns 1.14.0-dev", 1, 14, true},
		{"aardvark-dns", 0, 0, false},
		{"aardvark-dns one.two", 0, 0, false},
	} {
		major, minor, ok := parseAardvarkVersion(tc.in)
		if major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("%q: %d %d %v, want %d %d %v", tc.in, major, minor, ok, tc.major, tc.minor, tc.ok)
		}
	}
}

// TestDNSAnsweredAfterReload runs the host's aardvark-dns on a loopback
// address and adds entries one after the other, each followed by a lookup
// of its name the moment awaitDNS returns: every lookup is answered. An
// aardvark-dns before 1.11 closes and binds again its listeners on each
// reload (1 to 3 ms idle here); without the wait, lookups sent right after
// the reload are refused.
func TestDNSAnsweredAfterReload(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	binary := findHelper("aardvark-dns", []string{"/usr/lib/podman/aardvark-dns", "/usr/libexec/podman/aardvark-dns"})
	if binary == "" || os.Geteuid() != 0 {
		if os.Getenv("BERTH_TEST_STRICT") != "" {
			t.Fatal("aardvark-dns and root are needed (BERTH_TEST_STRICT is set)")
		}
		t.Skip("needs aardvark-dns and root")
	}
	gw := net.ParseIP("127.20.0.1")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "aardvark-dns"), 0o755); err != nil {
		t.Fatal(err)
	}
	nv := &netavark{aardvark: binary, configDir: dir}
	header := dnsHeader([]net.IP{gw}, nil)
	entry := func(i int) dnsEntry {
		return dnsEntry{containerID: fmt.Sprintf("c%03d", i), ips: []net.IP{net.IPv4(10, 99, 0, byte(i+2))}, names: []string{fmt.Sprintf("name%d", i)}}
	}
	if err := os.WriteFile(filepath.Join(dir, "aardvark-dns", "net1"), []byte(header+entry(0).line()), 0o644); err != nil {
		t.Fatal(err)
	}
	// aardvark-dns daemonizes before it listens (the first lookup was
	// refused 1 run in 7 without the wait below); its pid file names the
	// server.
	if out, err := exec.Command(binary, "--config", filepath.Join(dir, "aardvark-dns"), "-p", "53", "run").CombinedOutput(); err != nil {
		t.Fatalf("start aardvark-dns: %v %s", err, out)
	}
	t.Cleanup(func() {
		if pid := nv.aardvarkPID(); pid != 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if nv.aardvarkPID() == 0 {
		t.Fatal("aardvark-dns wrote no pid file")
	}
	if err := nv.awaitDNS([]net.IP{gw}, dnsListeners{}); err != nil {
		t.Fatal(err)
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", net.JoinHostPort(gw.String(), "53"))
	}}
	lookup := func(name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := resolver.LookupHost(ctx, name)
		if err != nil {
			return err
		}
		if len(addrs) == 0 || !strings.HasPrefix(addrs[0], "10.99.0.") {
			return fmt.Errorf("answered %v", addrs)
		}
		return nil
	}
	if err := lookup("name0"); err != nil {
		t.Fatalf("the first lookup: %v", err)
	}
	t.Logf("aardvark-dns %s rebinds on reload: %v", binary, nv.reloadRebinds())
	for i := 1; i <= 30; i++ {
		before, err := listDNSListeners([]net.IP{gw})
		if err != nil {
			t.Fatal(err)
		}
		if len(before[gw.String()]) == 0 {
			t.Fatalf("no listener on %s:53 before entry %d", gw, i)
		}
		if err := nv.addDNSEntry("net1", header, entry(i)); err != nil {
			t.Fatal(err)
		}
		if err := nv.awaitDNS([]net.IP{gw}, before); err != nil {
			t.Fatal(err)
		}
		if err := lookup("name" + strconv.Itoa(i)); err != nil {
			t.Fatalf("lookup right after entry %d: %v", i, err)
		}
	}
}
