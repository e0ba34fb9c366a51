// Package berthdocker runs testcontainers-go against berth-engine itself:
// DOCKER_HOST points at an engine this package starts (the binary
// hack/test.sh builds into bin/, or one built here), so every call
// testcontainers makes goes through the engine's Docker Engine API.
// Ryuk stays disabled (TESTCONTAINERS_RYUK_DISABLED): its image cannot be
// pulled here; the tests remove what they start.
package berthdocker

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"testing"

	"github.com/berth-project/berth/engine/testimage"
)

// engineAddr is the address of the engine TestMain started.
var engineAddr string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if reason := missing(); reason != "" {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			fmt.Fprintf(os.Stderr, "berthdocker: %s (BERTH_TEST_STRICT=1)\n", reason)
			return 1
		}
		fmt.Fprintf(os.Stderr, "berthdocker: skipped: %s\n", reason)
		return 0
	}
	dir, err := os.MkdirTemp("", "berthdocker-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := engineBinary(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berthdocker:", err)
		return 1
	}
	stop, err := startEngine(bin, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berthdocker:", err)
		return 1
	}
	defer stop()
	for key, value := range map[string]string{
		"DOCKER_HOST":                  "tcp://" + engineAddr,
		"TESTCONTAINERS_RYUK_DISABLED": "true",
		"TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
		"DOCKER_CONFIG":                dir,
	} {
		os.Setenv(key, value)
	}
	if err := loadBusybox(); err != nil {
		fmt.Fprintln(os.Stderr, "berthdocker:", err)
		return 1
	}
	return m.Run()
}

// missing names what the tests cannot run without, or "".
func missing() string {
	if os.Geteuid() != 0 {
		return "the engine runs containers as root"
	}
	for _, bin := range []string{"runc", "conmon"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " not found"
		}
	}
	if _, err := os.Stat(testimage.BusyboxPath); err != nil {
		return "busybox-static not installed"
	}
	if _, err := os.Stat("/usr/lib/podman/netavark"); err != nil {
		return "netavark not installed"
	}
	return ""
}

// engineBinary is BERTH_E2E_ENGINE_BINARY, the bin/berth-engine
// hack/test.sh builds, or a build made here.
func engineBinary(dir string) (string, error) {
	if p := os.Getenv("BERTH_E2E_ENGINE_BINARY"); p != "" {
		return p, nil
	}
	if p, err := filepath.Abs("../../bin/berth-engine"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	out := filepath.Join(dir, "berth-engine")
	cmd := exec.Command("go", "build", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper", "-o", out, "./cmd/berth-engine")
	cmd.Dir = "../../engine"
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if data, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building berth-engine: %v: %s", err, data)
	}
	return out, nil
}

// startEngine starts the engine on a free loopback port with networks of
// its own and returns the function that stops it and removes its
// containers' mounts.
func startEngine(bin, dir string) (func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	engineAddr = ln.Addr().String()
	ln.Close()
	var b [2]byte
	_, _ = rand.Read(b[:])
	second := 150 + int(b[0])%100
	prefix := fmt.Sprintf("btc%02x", b[1])
	args := []string{"--listen", "tcp://" + engineAddr, "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
		"--network-default", "podman", "--network-default-bridge", prefix + "0",
		"--network-default-subnet", fmt.Sprintf("10.%d.240.0/24", second), "--network-subnet-pool", fmt.Sprintf("10.%d.224.0/20", second),
		"--network-bridge-prefix", prefix}
	cmd := exec.Command(bin, args...)
	logFile, err := os.Create(filepath.Join(dir, "engine.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		removeAll()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		unmountUnder(dir)
		logFile.Close()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + engineAddr + "/_ping")
		if err == nil {
			resp.Body.Close()
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			log, _ := os.ReadFile(filepath.Join(dir, "engine.log"))
			return nil, fmt.Errorf("the engine did not answer: %s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeAll removes every container and the user networks, through the
// Docker API, so that no bridge or iptables rule outlives the tests.
func removeAll() {
	_ = exec.Command("sh", "-c", "docker ps -aq | xargs -r docker rm -f; docker network ls -q --filter type=custom | xargs -r docker network rm").Run()
}

func unmountUnder(dir string) {
	data, _ := os.ReadFile("/proc/self/mounts")
	var mps []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			mps = append(mps, f[1])
		}
	}
	for i := len(mps) - 1; i >= 0; i-- {
		_ = exec.Command("umount", "-l", mps[i]).Run()
	}
}

// loadBusybox loads localhost/busybox:latest through docker load.
func loadBusybox() error {
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, testimage.Busybox("localhost/busybox:latest", "sh")); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "load")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker load: %v: %s", err, out)
	}
	return nil
}
