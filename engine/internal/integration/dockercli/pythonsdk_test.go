package dockercli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// pythonProbe drives the engine with the docker SDK for Python (docker-py,
// which Compose v1 and Ansible's docker modules are built on); it prints
// one "ok NAME" line per call and fails on the first that does not work.
const pythonProbe = `
import io, sys, tarfile, time, docker
c = docker.from_env(version="auto")
img = "localhost/busybox:latest"
def ok(name, cond=True):
    if not cond:
        sys.exit("failed: " + name)
    print("ok", name)
ok("ping", c.ping())
ok("run", c.containers.run(img, "echo hello", remove=True) == b"hello\n")
net = c.networks.create("py-net", labels={"n": "1"})
vol = c.volumes.create("py-vol")
ct = c.containers.run(img, "sh -c 'echo started; exec sleep 300'", detach=True, name="py-ct",
                      network="py-net", volumes={"py-vol": {"bind": "/data", "mode": "rw"}},
                      environment={"X": "1"}, labels={"a": "b"})
time.sleep(1)
ct.reload()
ok("status", ct.status == "running")
ok("logs", ct.logs() == b"started\n")
r = ct.exec_run("sh -c 'echo $X; echo err >&2; exit 3'", demux=True)
ok("exec", r.exit_code == 3 and r.output == (b"1\n", b"err\n"))
ok("top", ct.top()["Processes"][0][-1].startswith("sleep"))
ok("stats", "memory_stats" in ct.stats(stream=False))
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    info = tarfile.TarInfo("f.txt"); info.size = 3; t.addfile(info, io.BytesIO(b"xyz"))
ok("put_archive", ct.put_archive("/data", buf.getvalue()))
stream, stat = ct.get_archive("/data/f.txt")
data = tarfile.open(fileobj=io.BytesIO(b"".join(stream))).extractfile("f.txt").read()
ok("get_archive", data == b"xyz" and stat["name"] == "f.txt")
ok("list", [x.name for x in c.containers.list(filters={"label": "a=b"})] == ["py-ct"])
ok("network", "py-ct" in [x.name for x in (net.reload() or net.containers)])
ct.stop(timeout=1)
ok("wait", ct.wait(timeout=10)["StatusCode"] == 137)
ct.remove(v=True)
net.remove()
vol.remove()
image, _ = c.images.build(fileobj=io.BytesIO(b"FROM " + img.encode() + b"\nRUN echo built > /b\n"), tag="localhost/py-built:1", rm=True)
ok("build", c.containers.run("localhost/py-built:1", "cat /b", remove=True) == b"built\n")
c.images.remove("localhost/py-built:1")
ok("events", any(e.get("Action") == "destroy" for e in c.events(decode=True, since=int(time.time()) - 60, until=int(time.time()) + 1)))
`

// TestDockerPythonSDK: the docker SDK for Python (Debian's python3-docker,
// which Compose v1 brings) against the engine: containers, exec, logs,
// archives, stats, networks, volumes, a build and events.
func TestDockerPythonSDK(t *testing.T) {
	need.All(t, "the docker SDK for Python (Debian's python3-docker; hack/deps.sh test installs docker-compose, which brings it)", "/usr/bin/python3", "/usr/lib/python3/dist-packages/docker/__init__.py")
	te := startEngine(t)
	script := filepath.Join(te.Dir, "probe.py")
	if err := os.WriteFile(script, []byte(pythonProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	out := te.run("/usr/bin/python3", script)
	if n := strings.Count(out, "ok "); n != 14 {
		t.Fatalf("the probe passed %d of 14 calls:\n%s", n, out)
	}
}
