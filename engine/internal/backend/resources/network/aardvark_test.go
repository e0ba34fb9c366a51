package network

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

func TestDNSEntryLines(t *testing.T) {
	ips := func(ss ...string) []net.IP {
		var out []net.IP
		for _, s := range ss {
			out = append(out, net.ParseIP(s))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		entry dnsEntry
		want  string
	}{
		{"IPv4 only, no servers", dnsEntry{containerID: "abc", ips: ips("10.89.0.2"), names: []string{"web", "www", "abc"}},
			"abc 10.89.0.2  web,www,abc\n"},
		{"dual stack with servers", dnsEntry{containerID: "abc", ips: ips("10.89.0.2", "fd00::2"), names: []string{"web"}, servers: ips("1.1.1.1", "8.8.8.8")},
			"abc 10.89.0.2 fd00::2 web 1.1.1.1,8.8.8.8\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.entry.line(); got != tc.want {
				t.Fatalf("line %q, want %q", got, tc.want)
			}
		})
	}
	if got := dnsHeader(ips("10.89.0.1"), nil); got != "10.89.0.1\n" {
		t.Fatalf("header without servers %q", got)
	}
	if got := dnsHeader(ips("10.89.0.1", "fd00::1"), []string{"9.9.9.9", "1.1.1.1"}); got != "10.89.0.1,fd00::1 9.9.9.9,1.1.1.1\n" {
		t.Fatalf("header with servers %q", got)
	}
}

func TestWithoutEntry(t *testing.T) {
	const file = "10.89.0.1\nkeep 10.89.0.254  berth-keeper-n,keep\nabc 10.89.0.2  web,abc\nabcd 10.89.0.3  other,abcd\n"
	for _, tc := range []struct {
		name, data, id, want string
		removed, headerOnly  bool
	}{
		{"the exact ID only, not a prefix of another", file, "abc", "10.89.0.1\nkeep 10.89.0.254  berth-keeper-n,keep\nabcd 10.89.0.3  other,abcd\n", true, false},
		{"a prefix of an ID matches nothing", file, "ab", file, false, false},
		{"an ID that appears as a name matches nothing", "10.89.0.1\nx 10.89.0.2  abc\n", "abc", "10.89.0.1\nx 10.89.0.2  abc\n", false, false},
		{"the last entry leaves the header", "10.89.0.1\nabc 10.89.0.2  web\n", "abc", "10.89.0.1\n", true, true},
		{"the header is never an entry", "abc\nx 10.89.0.2  y\n", "abc", "abc\nx 10.89.0.2  y\n", false, false},
		{"a last line without newline", "10.89.0.1\nx 10.89.0.3  x\nabc 10.89.0.2  web", "abc", "10.89.0.1\nx 10.89.0.3  x\n", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, removed, headerOnly := withoutEntry(tc.data, tc.id)
			if out != tc.want || removed != tc.removed || headerOnly != tc.headerOnly {
				t.Fatalf("got %q %v %v, want %q %v %v", out, removed, headerOnly, tc.want, tc.removed, tc.headerOnly)
			}
		})
	}
}

// TestDNSEntryFileUnderLock adds and removes entries in a configuration
// directory no aardvark-dns serves: the file is created with its header,
// appended to, waits for netavark's lock, and goes with its last entry.
func TestDNSEntryFileUnderLock(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "aardvark-dns"), 0o755); err != nil {
		t.Fatal(err)
	}
	nv := &netavark{configDir: dir}
	file := filepath.Join(dir, "aardvark-dns", "net1")
	header := dnsHeader([]net.IP{net.ParseIP("10.89.0.1")}, nil)
	a := dnsEntry{containerID: "aaa", ips: []net.IP{net.ParseIP("10.89.0.2")}, names: []string{"a", "aaa"}}
	b := dnsEntry{containerID: "bbb", ips: []net.IP{net.ParseIP("10.89.0.3")}, names: []string{"b", "bbb"}}
	if err := nv.addDNSEntry("net1", header, a); !errors.Is(err, errAardvarkNotRunning) {
		t.Fatalf("add without aardvark-dns: %v, want errAardvarkNotRunning", err)
	}

	// A second entry waits while another process (netavark) holds the lock.
	lock, err := os.OpenFile(filepath.Join(dir, "aardvark.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the lock file: %v", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- nv.addDNSEntry("net1", header, b) }()
	select {
	case err := <-done:
		t.Fatalf("added under another's lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if err := <-done; !errors.Is(err, errAardvarkNotRunning) {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(file)
	if want := "10.89.0.1\naaa 10.89.0.2  a,aaa\nbbb 10.89.0.3  b,bbb\n"; string(data) != want {
		t.Fatalf("file %q, want %q", data, want)
	}

	if err := nv.removeDNSEntry("net1", "aaa"); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(file)
	if want := "10.89.0.1\nbbb 10.89.0.3  b,bbb\n"; string(data) != want {
		t.Fatalf("after removing aaa %q, want %q", data, want)
	}
	if err := nv.removeDNSEntry("net1", "bbb"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the file outlived its last entry: %v", err)
	}
	if err := nv.removeDNSEntry("net1", "bbb"); err != nil {
		t.Fatalf("removing from a missing file: %v", err)
	}
}
