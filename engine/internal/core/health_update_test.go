package core

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHealthTest: podman's --health-cmd text becomes the check's Test as
// Podman's CLI makes it; an empty command is refused.
func TestHealthTest(t *testing.T) {
	for cmd, want := range map[string][]string{
		"curl -f http://x/":         {"CMD-SHELL", "curl -f http://x/"},
		`["curl","-f","http://x/"]`: {"CMD", "curl", "-f", "http://x/"},
		`["echo ok"]`:               {"CMD-SHELL", "echo ok"},
		`["CMD","true"]`:            {"CMD", "true"},
		"CMD /bin/check --fast":     {"CMD", "/bin/check", "--fast"},
		"CMD-SHELL exit 0":          {"CMD-SHELL", "exit 0"},
		"none":                      {"NONE"},
		`["NONE"]`:                  {"NONE"},
		"[not json":                 {"CMD-SHELL", "[not json"},
	} {
		if got, err := HealthTest(cmd); err != nil || !slices.Equal(got, want) {
			t.Errorf("HealthTest(%q) = %q, %v; want %q", cmd, got, err, want)
		}
	}
	for _, bad := range []string{"", "  ", "[]", `[""]`, "CMD", "CMD-SHELL  ", `["CMD"]`} {
		if got, err := HealthTest(bad); err == nil {
			t.Errorf("HealthTest(%q) = %q, want an error", bad, got)
		}
	}
}

// TestHealthUpdateApply: an update changes only the settings it names,
// starts from Podman's defaults where there was no check, and leaves the
// spec as it was when it is refused.
func TestHealthUpdateApply(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n uint) *uint { return &n }
	yes := true
	s := ContainerSpec{}
	u := HealthUpdate{Cmd: str("echo ok"), Interval: str("disable")}
	if err := u.Apply(&s); err != nil || s.HealthConfig == nil || s.HealthConfig.Interval != 0 || s.HealthConfig.Retries != 3 || s.HealthConfig.Timeout != 30*time.Second {
		t.Fatalf("a new check: %+v %v", s.HealthConfig, err)
	}
	u = HealthUpdate{Retries: num(5), StartPeriod: str("2s")}
	if err := u.Apply(&s); err != nil || s.HealthConfig.Test[1] != "echo ok" || s.HealthConfig.Retries != 5 || s.HealthConfig.StartPeriod != 2*time.Second {
		t.Fatalf("a changed check: %+v %v", s.HealthConfig, err)
	}
	u = HealthUpdate{StartupCmd: str("test -f /ready"), StartupSuccess: num(2), OnFailure: str("restart"), MaxLogSize: num(10)}
	if err := u.Apply(&s); err != nil || s.StartupHealthConfig == nil || s.StartupHealthConfig.Successes != 2 || s.HealthCheckOnFailureAction != HealthOnFailureRestart || *s.HealthMaxLogSize != 10 {
		t.Fatalf("a startup check: %+v %v", s.StartupHealthConfig, err)
	}
	u = HealthUpdate{NoHealthCheck: &yes}
	if err := u.Apply(&s); err != nil || !slices.Equal(s.HealthConfig.Test, []string{"NONE"}) || s.StartupHealthConfig != nil {
		t.Fatalf("no healthcheck: %+v %+v %v", s.HealthConfig, s.StartupHealthConfig, err)
	}
	kept := s
	for field, bad := range map[string]HealthUpdate{
		"no_healthcheck":       {NoHealthCheck: &yes, Retries: num(2)},
		"health_cmd":           {Interval: str("5s")},
		"health_startup_cmd":   {StartupRetries: num(1)},
		"health_interval":      {Cmd: str("true"), Interval: str("-1s")},
		"health_timeout":       {Cmd: str("true"), Timeout: str("0s")},
		"health_start_period":  {Cmd: str("true"), StartPeriod: str("later")},
		"health_retries":       {Cmd: str("true"), Retries: num(0)},
		"health_on_failure":    {OnFailure: str("panic")},
		"healthLogDestination": {LogDestination: str("relative/dir")},
		"startupHealthConfig":  {StartupCmd: str("true")},
	} {
		s := kept
		var fe *FieldError
		if err := bad.Apply(&s); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%+v: %v, want a 400 naming %s", bad, err, field)
		}
		if !slices.Equal(s.HealthConfig.Test, kept.HealthConfig.Test) || s.HealthCheckOnFailureAction != kept.HealthCheckOnFailureAction {
			t.Errorf("%+v changed the spec when refused", bad)
		}
	}
}

// FuzzHealthUpdate: a client's healthcheck command and durations (podman
// update --health-*), applied to a spec with a check: a refusal is a 400
// naming a member and leaves the spec as it was; an accepted update leaves
// a spec whose healthcheck validates, with a command or NONE.
func FuzzHealthUpdate(f *testing.F) {
	f.Add("curl -f http://x/", "30s", "5s", uint(3))
	f.Add(`["CMD","true"]`, "disable", "1s", uint(1))
	f.Add("none", "-1s", "0s", uint(0))
	f.Add(`[""]`, "1h", "later", uint(7))
	f.Fuzz(func(t *testing.T, cmd, interval, timeout string, retries uint) {
		s := ContainerSpec{HealthConfig: &HealthConfig{Test: []string{"CMD-SHELL", "true"}, Interval: time.Second, Retries: 3, Timeout: time.Second}}
		before := *s.HealthConfig
		u := HealthUpdate{Cmd: &cmd, Interval: &interval, Timeout: &timeout, Retries: &retries}
		err := u.Apply(&s)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("a refusal that is not a 400 naming a member: %v", err)
			}
			if !slices.Equal(s.HealthConfig.Test, before.Test) || s.HealthConfig.Interval != before.Interval {
				t.Fatalf("a refused update changed the spec: %+v", s.HealthConfig)
			}
			return
		}
		if err := s.ValidateHealth(); err != nil || len(s.HealthConfig.Test) == 0 || s.HealthConfig.Retries < 1 || s.HealthConfig.Timeout <= 0 {
			t.Fatalf("accepted %q %q %q %d into %+v (%v)", cmd, interval, timeout, retries, s.HealthConfig, err)
		}
	})
}

// FuzzCleanVolumeSubPath: an accepted subpath is relative, clean and never
// leads above the volume's root ("." is the root itself, as Podman and
// dockerd take it).
func FuzzCleanVolumeSubPath(f *testing.F) {
	for _, s := range []string{"sub", "/a/b", "a/../b", "../x", "a/../../x", "/", "", "a\x00b", "./c/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sub string) {
		got, err := CleanVolumeSubPath(sub)
		if err != nil {
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || got == ".." || strings.HasPrefix(got, "../") || filepath.Clean(got) != got || strings.ContainsRune(got, 0) {
			t.Fatalf("CleanVolumeSubPath(%q) = %q", sub, got)
		}
	})
}
