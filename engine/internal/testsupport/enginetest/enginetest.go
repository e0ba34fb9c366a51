// Package enginetest holds what the tests of several packages need to run
// an in-process engine against the real runtime: the runtime check, serving
// the engine on a loopback listener, requests to it and cleanup.
package enginetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/testimage"
)

// RequireRuntime skips (or fails under BERTH_TEST_STRICT=1) without root,
// runc, conmon or busybox-static; what names the tests in the message.
func RequireRuntime(t testing.TB, what string) {
	t.Helper()
	need.All(t, what, "root", "runc", "conmon", testimage.BusyboxPath)
}

// Serve serves an engine with its state under root and runRoot on a
// loopback listener until stop is called and returns the listener's
// address; containers keep running after stop, as after an engine restart.
// Containers that name no network mode get a private namespace with
// loopback only (ServeConfig with a bridge default tests networks); the
// engine's networks are unique to the test (UniqueNetworks).
func Serve(t testing.TB, root, runRoot string) (addr string, stop func()) {
	t.Helper()
	nets := UniqueNetworks(t)
	nets.DefaultMode = "private"
	return ServeConfig(t, nil, engine.Config{Root: root, RunRoot: runRoot, Runtime: "runc", Network: nets})
}

// UniqueNetworks returns a network configuration whose bridge names and
// subnets no other test, engine or Podman on the host uses: bridges
// btXXXXXX0, btXXXXXX1 ... and a random 10.x.y.0/20 block (the default network
// on its first /24) that no host route covers.
func UniqueNetworks(t testing.TB) engine.NetworkConfig {
	t.Helper()
	var routes []*net.IPNet
	if data, err := exec.Command("ip", "-4", "route", "show").Output(); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				if _, n, err := net.ParseCIDR(f[0]); err == nil {
					routes = append(routes, n)
				}
			}
		}
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for attempt := 0; attempt < 1000; attempt++ {
		var b [4]byte
		rand.Read(b[:])
		block := &net.IPNet{IP: net.IPv4(10, 150+b[0]%100, b[1]&0xf0, 0).To4(), Mask: net.CIDRMask(20, 32)}
		free := true
		for _, r := range routes {
			if r.Contains(block.IP) || block.Contains(r.IP) {
				free = false
			}
		}
		if !free {
			continue
		}
		// Six hex digits (bridge names stay far below the kernel's 15
		// characters), none that an interface on the host starts with
		// already: two engines of concurrent test packages never share
		// a prefix, so neither takes the other's bridges for its leaks.
		prefix := fmt.Sprintf("bt%02x%02x%02x", b[2], b[3], b[0])
		if strings.Contains(string(links), " "+prefix) {
			continue
		}
		return engine.NetworkConfig{
			DefaultNetwork: "podman",
			DefaultBridge:  prefix + "0",
			DefaultSubnet:  fmt.Sprintf("10.%d.%d.0/24", block.IP[1], block.IP[2]),
			SubnetPool:     []string{block.String()},
			BridgePrefix:   prefix,
		}
	}
	t.Fatal("no free 10.x.y.0/20 block for the test's networks")
	return engine.NetworkConfig{}
}

// NetworkFlags are berth-engine's flags for a network configuration.
func NetworkFlags(c engine.NetworkConfig) []string {
	out := []string{
		"--network-default", c.DefaultNetwork, "--network-default-bridge", c.DefaultBridge,
		"--network-default-subnet", c.DefaultSubnet, "--network-subnet-pool", strings.Join(c.SubnetPool, ","),
		"--network-bridge-prefix", c.BridgePrefix,
	}
	if c.DefaultMode != "" {
		out = append(out, "--network-default-mode", c.DefaultMode)
	}
	return out
}

// ServeConfig is Serve with a whole engine configuration and the logger
// that receives its log (nil discards it); an empty Listen becomes the
// loopback listener's tcp:// address.
func ServeConfig(t testing.TB, logger *slog.Logger, cfg engine.Config) (addr string, stop func()) {
	t.Helper()
	_, addr, stop = serve(t, logger, cfg)
	return addr, stop
}

// serve is ServeConfig with a logger, answering the engine too.
func serve(t testing.TB, logger *slog.Logger, cfg engine.Config) (*engine.Engine, string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen == "" {
		cfg.Listen = "tcp://" + ln.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.New(ctx, logger, cfg)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatal(err)
	}
	srv := &http.Server{Handler: eng.Handler()}
	go srv.Serve(ln)
	return eng, ln.Addr().String(), func() {
		srv.Close()
		cancel()
		eng.Close()
	}
}

// UnmountUnder lazily unmounts whatever is still mounted below dir, in up
// to rounds rounds in case a mount appeared while the engine was shutting
// down.
func UnmountUnder(dir string, rounds int) {
	for round := 0; round < rounds; round++ {
		data, _ := os.ReadFile("/proc/self/mounts")
		var mps []string
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
				mps = append(mps, f[1])
			}
		}
		if len(mps) == 0 {
			return
		}
		for i := len(mps) - 1; i >= 0; i-- {
			exec.Command("umount", "-l", mps[i]).Run()
		}
		if round < rounds-1 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Do sends a request to base+path and returns the status and body; a
// non-nil body that is neither an io.Reader nor a string is sent as JSON.
func Do(t testing.TB, client *http.Client, method, base, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r = b
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// RemoveAll force-removes every container the engine that do talks to
// knows of.
func RemoveAll(do func(method, path string, body any) (int, []byte)) {
	status, body := do("GET", "/containers/json?all=true", nil)
	if status != http.StatusOK {
		return
	}
	var list []struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(body, &list)
	for _, c := range list {
		do("DELETE", "/containers/"+c.ID+"?force=true&timeout=0", nil)
	}
}

// Must sends a request through do and fails t unless the answer has the
// wanted status; it returns the body.
func Must(t testing.TB, do func(method, path string, body any) (int, []byte), want int, method, path string, body any) []byte {
	t.Helper()
	status, data := do(method, path, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	return data
}
