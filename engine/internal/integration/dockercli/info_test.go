package dockercli

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDockerInfoAsDockerd: docker info says what dockerd's says of the
// same host (compared with dockerd 20.10 beside the engine): the
// architecture as uname -m names it, os-release's PRETTY_NAME, the
// engine's goroutines and open files, the loopback registries it talks
// to without TLS verification, the predefined networks' drivers. Before:
// amd64, "debian 12", zeros, no insecure registries.
func TestDockerInfoAsDockerd(t *testing.T) {
	te := startEngine(t)
	machine, err := exec.Command("uname", "-m").Output()
	if err != nil {
		t.Fatal(err)
	}
	pretty := ""
	if f, err := os.Open("/etc/os-release"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
				pretty = strings.Trim(v, `"`)
			}
		}
		f.Close()
	}
	got := te.run("docker", "info", "--format", "{{.Architecture}}|{{.OperatingSystem}}|{{gt .NGoroutines 0}}|{{gt .NFd 0}}|{{.RegistryConfig.InsecureRegistryCIDRs}}|{{.Plugins.Network}}|{{.InitBinary}}")
	want := strings.TrimSpace(string(machine)) + "|" + pretty + "|true|true|[127.0.0.0/8 ::1/128]|[bridge macvlan host null]|catatonit"
	if strings.TrimSpace(got) != want {
		t.Fatalf("docker info: %s\nwant %s", got, want)
	}
}
