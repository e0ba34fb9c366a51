package containers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestUpdateHealthEnvAndDeviceLimits: what Podman 5 and 6 add to update's
// body takes effect, where it was dropped without a word before. The
// healthcheck changes (a new check runs on its interval, a changed one on
// its new command, none stops the schedule, the on-failure action and log
// bounds show in inspect); Podman 6's variables and rlimits reach the execs
// of the running container at once and its next start; per-device limits
// by path reach inspect. Each bad member is a 400 naming it, and changes
// nothing.
func TestUpdateHealthEnvAndDeviceLimits(t *testing.T) {
	te := startEngine(t)
	te.create(map[string]any{"name": "upd", "command": []string{"sleep", "600"}, "env": map[string]string{"KEEP": "1", "GONE": "1"}})
	te.Must(http.StatusNoContent, "POST", "/containers/upd/start", nil)
	update := func(body map[string]any) {
		t.Helper()
		te.Must(http.StatusCreated, "POST", "/containers/upd/update", body)
	}
	type inspected struct {
		State struct {
			Health core.HealthCheckResults
		}
		Config struct {
			Healthcheck                *core.HealthConfig
			HealthcheckOnFailureAction string
			HealthMaxLogCount          uint `json:"HealthcheckMaxLogCount"`
		}
		HostConfig struct {
			BlkioDeviceReadBps []core.InspectBlkioThrottleDevice
		}
	}
	inspect := func() inspected { return enginetest.Fetch[inspected](te.Engine, "/containers/upd/json") }

	update(map[string]any{"health_cmd": "echo ok", "health_interval": "1s"})
	if hc := inspect().Config.Healthcheck; hc == nil || !slices.Equal(hc.Test, []string{"CMD-SHELL", "echo ok"}) || hc.Interval != time.Second || hc.Retries != 3 || hc.Timeout != 30*time.Second {
		t.Fatalf("the healthcheck an update made: %+v", hc)
	}
	poll.Until(t, 15*time.Second, "the new healthcheck ran on its interval", func() bool { return inspect().State.Health.Status == "healthy" })
	update(map[string]any{"health_cmd": "exit 1", "health_retries": 1})
	poll.Until(t, 15*time.Second, "the changed healthcheck ran", func() bool { return inspect().State.Health.Status == "unhealthy" })
	update(map[string]any{"no_healthcheck": true})
	if hc := inspect().Config.Healthcheck; hc == nil || !slices.Equal(hc.Test, []string{"NONE"}) {
		t.Fatalf("after no_healthcheck: %+v", hc)
	}
	time.Sleep(1200 * time.Millisecond) // a check under way when the update came may still end
	ran := len(inspect().State.Health.Log)
	time.Sleep(2500 * time.Millisecond)
	if n := len(inspect().State.Health.Log); n != ran {
		t.Errorf("checks ran after no_healthcheck: %d results, then %d", ran, n)
	}
	update(map[string]any{"health_on_failure": "kill", "health_max_log_count": 2})
	if c := inspect().Config; c.HealthcheckOnFailureAction != "kill" || c.HealthMaxLogCount != 2 {
		t.Errorf("on-failure action and log bound: %+v", c)
	}

	update(map[string]any{"Env": []string{"NEW=yes"}, "UnsetEnv": []string{"GONE"}, "r_limits": []map[string]any{{"type": "nofile", "soft": 100, "hard": 200}}})
	// An exec's hard limit: runc 1.1.5 (Debian 12's, built with Go 1.19)
	// sets an exec's rlimits with prlimit from the outside while the Go
	// runtime of its runc init raises the soft NOFILE limit to the hard
	// one (opencontainers/runc#4195, fixed in runc 1.1.13), so an exec's
	// soft limit may read as the hard one whatever the spec says: on one
	// of these machines it always did. The container's own process gets
	// both (checked after the restart, in /proc/1/limits).
	probe := `echo $NEW ${GONE:-unset} $KEEP; ulimit -Hn`
	if out, err := te.Podman("exec", "upd", "sh", "-c", probe); err != nil || strings.TrimSpace(out) != "yes unset 1\n200" {
		t.Errorf("an exec after the update: %v %q", err, out)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/upd/stop?timeout=0", nil)
	te.Must(http.StatusNoContent, "POST", "/containers/upd/start", nil)
	if out, err := te.Podman("exec", "upd", "sh", "-c", probe+`; tr '\0' '\n' < /proc/1/environ | grep -c -e ^NEW=yes -e ^GONE=; grep 'open files' /proc/1/limits`); err != nil || !strings.HasPrefix(strings.TrimSpace(out), "yes unset 1\n200\n1\n") || !slices.Equal(strings.Fields(out)[len(strings.Fields(out))-3:], []string{"100", "200", "files"}) {
		t.Errorf("the next start: %v %q", err, out)
	}

	if dev := firstBlockDevice(); dev != "" {
		update(map[string]any{"DeviceReadBPs": []map[string]any{{"Path": dev, "Rate": 1 << 20}}})
		if got := inspect().HostConfig.BlkioDeviceReadBps; len(got) != 1 || got[0].Path != dev || got[0].Rate != 1<<20 {
			t.Errorf("a device's read limit by path: %+v", got)
		}
	}

	// podman update --memory-swappiness (dropped before): kept for the
	// next start (runc update does not change it on a running container).
	update(map[string]any{"memory": map[string]any{"swappiness": 10}})
	swappy := enginetest.Fetch[struct {
		HostConfig struct{ MemorySwappiness int64 }
	}](te.Engine, "/containers/upd/json")
	if swappy.HostConfig.MemorySwappiness != 10 {
		t.Errorf("memory swappiness after the update: %d", swappy.HostConfig.MemorySwappiness)
	}

	before := inspect()
	for member, body := range map[string]map[string]any{
		"BlkIOWeightDevice":  {"BlkIOWeightDevice": []map[string]any{{"Path": "/dev/sda", "Weight": 10}}},
		"no_healthcheck":     {"no_healthcheck": true, "health_interval": "2s"},
		"health_interval":    {"health_cmd": "true", "health_interval": "soon"},
		"health_timeout":     {"health_cmd": "true", "health_timeout": "0s"},
		"health_retries":     {"health_cmd": "true", "health_retries": 0},
		"health_on_failure":  {"health_on_failure": "explode"},
		"health_startup_cmd": {"health_startup_interval": "1s"},
		"Env[0]":             {"Env": []string{"NOVALUE"}},
		"UnsetEnv[0]":        {"UnsetEnv": []string{"A=B"}},
		"r_limits[0]":        {"r_limits": []map[string]any{{"type": "nosuch", "soft": 1, "hard": 1}}},
		"DeviceReadBPs":      {"DeviceReadBPs": []map[string]any{{"Path": "/dev/null", "Rate": 1}}},
		"surprise":           {"surprise": 1},
		"hugepageLimits":     {"hugepageLimits": []map[string]any{{"pageSize": "2MB", "limit": 2097152}}},
		"blockIO":            {"blockIO": map[string]any{"leafWeight": 10}},
	} {
		status, out := te.Do("POST", "/containers/upd/update", body)
		if status != http.StatusBadRequest || !strings.Contains(string(out), member) {
			t.Errorf("update %v: %d %s, want a 400 naming %s", body, status, out, member)
		}
	}
	if after := inspect(); !reflect.DeepEqual(after.Config, before.Config) || !reflect.DeepEqual(after.HostConfig, before.HostConfig) {
		t.Errorf("refused updates changed the container:\n%+v\n%+v", before, after)
	}
}

// firstBlockDevice is a block device node of the host other than a loop
// device, or "".
func firstBlockDevice() string {
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		if _, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "dev")); err != nil || strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		if _, err := os.Stat("/dev/" + e.Name()); err == nil {
			return "/dev/" + e.Name()
		}
	}
	return ""
}
