package securityapi

import (
	"os"
	"strings"
	"testing"
)

// TestAppArmorWithoutHostSupport: on a host whose kernel does not enforce
// AppArmor (these machines), info says so, apparmor=unconfined works and
// a named profile is refused with a 400, never ignored. (The enforcing side
// needs the host lab VM.)
func TestAppArmorWithoutHostSupport(t *testing.T) {
	if data, err := os.ReadFile("/sys/module/apparmor/parameters/enabled"); err == nil && strings.TrimSpace(string(data)) == "Y" {
		t.Skip("this host enforces AppArmor")
	}
	te := startEngine(t)
	te.Load(busybox)
	if te.hostSecurity().ApparmorEnabled {
		t.Errorf("info: apparmorEnabled true on a host without AppArmor")
	}
	te.MustPodman("run", "--rm", "--security-opt", "apparmor=unconfined", "localhost/busybox", "true")
	if got := te.inspect(strings.TrimSpace(te.MustPodman("create", "localhost/busybox", "true")))["AppArmorProfile"]; got != "" {
		t.Errorf("AppArmorProfile %v, want none", got)
	}
	before := te.ContainerCount()
	out, err := te.Podman("create", "--security-opt", "apparmor=berth-default", "localhost/busybox", "true")
	if err == nil || !strings.Contains(out, "invalid apparmor_profile") || !strings.Contains(out, "not enabled") {
		t.Errorf("apparmor=berth-default without AppArmor: %v\n%s", err, out)
	}
	if n := te.ContainerCount(); n != before {
		t.Errorf("%d containers after a refused create, want %d", n, before)
	}
}
