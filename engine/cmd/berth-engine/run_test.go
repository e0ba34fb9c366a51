package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/shared/buildinfo"
)

func TestParseFlagsDefaultsAndEnvironment(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	cfg, err := parseFlags([]string{"berth-engine"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.engine.Listen != "unix:///run/berth/berth.sock" || cfg.engine.Root != "/var/lib/berth" || cfg.engine.RunRoot != "/run/berth" ||
		cfg.engine.Runtime != "runc" || cfg.engine.StorageDriver != "" || cfg.shutdownTimeout != 30*time.Second ||
		cfg.engine.SwaggerSpec != "/usr/share/containers/berth/swagger.yaml" || cfg.logFormat != "text" || cfg.logLevel != "info" {
		t.Errorf("defaults: %+v", cfg)
	}

	env["BERTH_ENGINE_LISTEN"] = "tcp://127.0.0.1:9"
	env["BERTH_ENGINE_ROOT"] = "/tmp/r"
	env["BERTH_ENGINE_STORAGE_DRIVER"] = "vfs"
	env["BERTH_ENGINE_SHUTDOWN_TIMEOUT"] = "5s"
	cfg, err = parseFlags([]string{"berth-engine", "--root", "/tmp/flag"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.engine.Listen != "tcp://127.0.0.1:9" || cfg.engine.Root != "/tmp/flag" || cfg.engine.StorageDriver != "vfs" || cfg.shutdownTimeout != 5*time.Second {
		t.Errorf("environment and flags: %+v", cfg)
	}
}

func TestParseFlagsRejectsBadValues(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, args := range [][]string{
		{"--runtime", "kata"},
		{"--storage-driver", "btrfs"},
		{"--shutdown-timeout", "soon"},
		{"--shutdown-timeout", "-1s"},
		{"--root", ""},
		{"--no-such-flag"},
		{"extra"},
	} {
		if _, err := parseFlags(append([]string{"berth-engine"}, args...), getenv, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestRunVersion(t *testing.T) {
	var stdout strings.Builder
	err := run(context.Background(), []string{"berth-engine", "--version"}, func(string) string { return "" }, &stdout, io.Discard)
	want := buildinfo.Get().String("berth-engine") + "\n"
	if err != nil || stdout.String() != want || !strings.Contains(want, " (commit ") {
		t.Fatalf("--version: %q %v, want %q", stdout.String(), err, want)
	}
}
