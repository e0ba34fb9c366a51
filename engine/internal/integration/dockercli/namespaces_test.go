package dockercli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIPCAndUTSNamespaces: docker and podman run --ipc host --uts host put
// the container in the host's IPC and UTS namespaces (the same namespace
// links as the engine's host, the host's hostname, the host's /dev/shm);
// --ipc none keeps a namespace of its own without /dev/shm; the default is
// a namespace of its own with one. Inspect says which; a size for the host's
// /dev/shm, a hostname in the host's UTS namespace and an IPC mode the engine
// has not are refused naming the option.
func TestIPCAndUTSNamespaces(t *testing.T) {
	te := startEngine(t)
	hostIPC, _ := os.Readlink("/proc/self/ns/ipc")
	hostUTS, _ := os.Readlink("/proc/self/ns/uts")
	hostname, _ := os.Hostname()
	probe := filepath.Join("/dev/shm", "berth-ipc-"+filepath.Base(te.Dir))
	if err := os.WriteFile(probe, []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(probe) })
	script := "readlink /proc/self/ns/ipc; readlink /proc/self/ns/uts; hostname; cat " + probe
	want := strings.Join([]string{hostIPC, hostUTS, hostname, "from the host"}, "\n")
	for _, client := range []string{"docker", "podman"} {
		out := te.run(client, "run", "--rm", "--ipc", "host", "--uts", "host", "localhost/busybox:latest", "sh", "-c", script)
		if strings.TrimSpace(out) != want {
			t.Fatalf("%s run --ipc host --uts host:\n%s\nwant:\n%s", client, out, want)
		}
	}
	out := te.run("docker", "run", "--rm", "--ipc", "none", "localhost/busybox:latest", "sh", "-c", "readlink /proc/self/ns/ipc; ls -d /dev/shm || echo no-shm")
	if strings.Contains(out, hostIPC) || !strings.Contains(out, "no-shm") {
		t.Fatalf("docker run --ipc none: %s", out)
	}
	out = te.run("docker", "run", "--rm", "localhost/busybox:latest", "sh", "-c", "readlink /proc/self/ns/ipc; readlink /proc/self/ns/uts; ls -d /dev/shm")
	if strings.Contains(out, hostIPC) || strings.Contains(out, hostUTS) || !strings.Contains(out, "/dev/shm") {
		t.Fatalf("a default container: %s", out)
	}

	te.run("docker", "create", "--name", "nsmodes", "--ipc", "host", "--uts", "host", "localhost/busybox:latest", "true")
	for _, client := range []string{"docker", "podman"} {
		if got := strings.TrimSpace(te.run(client, "inspect", "--format", "{{.HostConfig.IpcMode}} {{.HostConfig.UTSMode}}", "nsmodes")); got != "host host" {
			t.Fatalf("%s inspect: %q, want host host", client, got)
		}
	}
	te.run("docker", "rm", "nsmodes")

	contains(t, "--ipc host --shm-size", te.fails("podman", "run", "--rm", "--ipc", "host", "--shm-size", "1m", "localhost/busybox:latest", "true"), "shm_size")
	contains(t, "--uts host --hostname", te.fails("docker", "run", "--rm", "--uts", "host", "--hostname", "web", "localhost/busybox:latest", "true"), "hostname")
	contains(t, "--ipc container:", te.fails("docker", "run", "--rm", "--ipc", "container:nosuch", "localhost/busybox:latest", "true"), "IpcMode")

	// A shareable container's IPC namespace and /dev/shm are joined by
	// docker's and podman's --ipc container:NAME; Docker's default, private,
	// is refused as dockerd refuses it.
	te.run("docker", "run", "-d", "--name", "ipcdonor", "--ipc", "shareable", "localhost/busybox:latest", "sh", "-c", "echo shared > /dev/shm/seg; exec sleep 600")
	te.run("docker", "run", "-d", "--name", "ipcprivate", "localhost/busybox:latest", "sleep", "600")
	donorNS := strings.TrimSpace(te.run("docker", "exec", "ipcdonor", "sh", "-c", "ls -l /proc/1/ns/ipc | sed 's/.*-> //'"))
	for _, client := range []string{"docker", "podman"} {
		out := te.run(client, "run", "--rm", "--ipc", "container:ipcdonor", "localhost/busybox:latest", "sh", "-c",
			"for i in $(seq 50); do test -f /dev/shm/seg && break; sleep 0.1; done; cat /dev/shm/seg; ls -l /proc/self/ns/ipc | sed 's/.*-> //'")
		if want := "shared\n" + donorNS; strings.TrimSpace(out) != want {
			t.Errorf("%s run --ipc container:ipcdonor: %q, want %q", client, out, want)
		}
	}
	if got := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.HostConfig.IpcMode}}", "ipcdonor", "ipcprivate")); got != "shareable\nprivate" {
		t.Errorf("docker inspect IpcMode: %q", got)
	}
	contains(t, "--ipc container:a private one", te.fails("docker", "run", "--rm", "--ipc", "container:ipcprivate", "localhost/busybox:latest", "true"), "non-shareable")
	te.run("docker", "rm", "-f", "ipcdonor", "ipcprivate")
}

// TestDockerCgroupnsAndHostGateway: docker run --cgroupns private gives the
// container a cgroup namespace of its own (its cgroups read as the root),
// --cgroupns host the host's, and inspect says which; --add-host
// NAME:host-gateway names the gateway of the container's network.
func TestDockerCgroupnsAndHostGateway(t *testing.T) {
	te := startEngine(t)
	hostNS, _ := os.Readlink("/proc/self/ns/cgroup")
	nsScript := "ls -l /proc/self/ns/cgroup | sed 's/.*-> //'"
	if got := strings.TrimSpace(te.run("docker", "run", "--rm", "--cgroupns", "private", "localhost/busybox:latest", "sh", "-c", nsScript)); got == hostNS || got == "" {
		t.Errorf("--cgroupns private: namespace %q, the host's is %q", got, hostNS)
	}
	if got := strings.TrimSpace(te.run("docker", "run", "--rm", "--cgroupns", "host", "localhost/busybox:latest", "sh", "-c", nsScript)); got != hostNS {
		t.Errorf("--cgroupns host: namespace %q, want the host's %q", got, hostNS)
	}
	te.run("docker", "create", "--name", "cgns", "--cgroupns", "private", "localhost/busybox:latest", "true")
	if got := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.HostConfig.CgroupnsMode}}", "cgns")); got != "private" {
		t.Errorf("inspect CgroupnsMode %q", got)
	}
	te.run("docker", "rm", "cgns")
	contains(t, "--cgroupns bogus", te.fails("docker", "run", "--rm", "--cgroupns", "bogus", "localhost/busybox:latest", "true"), "cgroupns")

	gateway := strings.TrimSpace(te.run("docker", "network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", "bridge"))
	out := te.run("docker", "run", "--rm", "--add-host", "gw:host-gateway", "localhost/busybox:latest", "grep", "-w", "gw", "/etc/hosts")
	if gateway == "" || strings.TrimSpace(out) != gateway+"\tgw" {
		t.Errorf("--add-host gw:host-gateway: %q, want the bridge's gateway %q", out, gateway)
	}
}

// TestDockerDomainname: docker run --domainname sets the container's NIS
// domain name (kernel.domainname in its UTS namespace: runc 1.1 leaves the
// spec's domainname unapplied), /etc/hosts names the container by its
// FQDN first (hostname -f), and inspect shows it; with the host's UTS
// namespace it is a 400 naming Config.Domainname.
func TestDockerDomainname(t *testing.T) {
	te := startEngine(t)
	out := te.run("docker", "run", "--name", "dom", "--hostname", "web", "--domainname", "example.org", "localhost/busybox:latest",
		"sh", "-c", "cat /proc/sys/kernel/domainname; hostname -f")
	if strings.TrimSpace(out) != "example.org\nweb.example.org" {
		t.Errorf("domain name and FQDN: %q", out)
	}
	if got := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.Config.Domainname}}", "dom")); got != "example.org" {
		t.Errorf("inspect Config.Domainname %q", got)
	}
	te.run("docker", "rm", "dom")
	contains(t, "--uts host --domainname", te.fails("docker", "run", "--rm", "--uts", "host", "--domainname", "x", "localhost/busybox:latest", "true"), "Config.Domainname")
}

// TestExecPrivileged: docker and podman exec --privileged give the process
// every capability of the engine's bounding set; a plain exec keeps the
// container's set.
func TestExecPrivileged(t *testing.T) {
	te := startEngine(t)
	status, _ := os.ReadFile("/proc/self/status")
	var bounding string
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bounding = strings.TrimSpace(v)
		}
	}
	te.run("docker", "run", "-d", "--name", "privexec", "localhost/busybox:latest", "sleep", "600")
	capEff := "grep CapEff /proc/self/status | cut -f2"
	plain := strings.TrimSpace(te.run("docker", "exec", "privexec", "sh", "-c", capEff))
	for _, client := range []string{"docker", "podman"} {
		if got := strings.TrimSpace(te.run(client, "exec", "--privileged", "privexec", "sh", "-c", capEff)); got != bounding || got == plain {
			t.Errorf("%s exec --privileged: CapEff %s, want the engine's bounding set %s (a plain exec has %s)", client, got, bounding, plain)
		}
	}
	te.run("docker", "rm", "-f", "privexec")
}
