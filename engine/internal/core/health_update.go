package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// HealthUpdate is a change of a container's healthchecks, as Podman 5's
// `podman update --health-*`, `--health-startup-*` and `--no-healthcheck`
// send it (the members of its update body, named as on the wire). Each set
// member replaces that one setting; commands and durations are the
// client's text, which the engine parses as Podman's CLI parses them.
type HealthUpdate struct {
	Cmd         *string `json:"health_cmd,omitempty"`
	Interval    *string `json:"health_interval,omitempty"`
	Retries     *uint   `json:"health_retries,omitempty"`
	Timeout     *string `json:"health_timeout,omitempty"`
	StartPeriod *string `json:"health_start_period,omitempty"`

	StartupCmd      *string `json:"health_startup_cmd,omitempty"`
	StartupInterval *string `json:"health_startup_interval,omitempty"`
	StartupRetries  *uint   `json:"health_startup_retries,omitempty"`
	StartupTimeout  *string `json:"health_startup_timeout,omitempty"`
	StartupSuccess  *uint   `json:"health_startup_success,omitempty"`

	NoHealthCheck  *bool   `json:"no_healthcheck,omitempty"`
	OnFailure      *string `json:"health_on_failure,omitempty"`
	LogDestination *string `json:"health_log_destination,omitempty"`
	MaxLogCount    *uint   `json:"health_max_log_count,omitempty"`
	MaxLogSize     *uint   `json:"health_max_log_size,omitempty"`
}

// Podman's defaults for a healthcheck an update makes where there was none.
const (
	defaultHealthInterval = 30 * time.Second
	defaultHealthRetries  = 3
	defaultHealthTimeout  = 30 * time.Second
)

func (u *HealthUpdate) regular() bool {
	return u.Cmd != nil || u.Interval != nil || u.Retries != nil || u.Timeout != nil || u.StartPeriod != nil
}

func (u *HealthUpdate) startup() bool {
	return u.StartupCmd != nil || u.StartupInterval != nil || u.StartupRetries != nil || u.StartupTimeout != nil || u.StartupSuccess != nil
}

// Empty reports whether the update changes nothing.
func (u *HealthUpdate) Empty() bool {
	return !u.regular() && !u.startup() && u.NoHealthCheck == nil && u.OnFailure == nil &&
		u.LogDestination == nil && u.MaxLogCount == nil && u.MaxLogSize == nil
}

// ChangesSchedule reports whether the update changes what runs when: the
// checks' commands or timing (a running container's schedule is made anew).
func (u *HealthUpdate) ChangesSchedule() bool {
	return u.regular() || u.startup() || u.NoHealthCheck != nil && *u.NoHealthCheck
}

// Apply changes s's healthcheck settings as u says. A 400 names the member
// at fault, and s is then unchanged.
func (u *HealthUpdate) Apply(s *ContainerSpec) error {
	next := *s
	if u.NoHealthCheck != nil && *u.NoHealthCheck {
		if u.regular() || u.startup() {
			return InvalidArgument("no_healthcheck", errors.New("cannot go with other healthcheck settings"))
		}
		next.HealthConfig = &HealthConfig{Test: []string{"NONE"}}
		next.StartupHealthConfig = nil
	}
	if u.regular() {
		base := HealthConfig{Interval: defaultHealthInterval, Retries: defaultHealthRetries, Timeout: defaultHealthTimeout}
		if hasHealthCommand(s.HealthConfig) {
			base = *s.HealthConfig
		} else if u.Cmd == nil {
			return InvalidArgument("health_cmd", errors.New("the container has no healthcheck: give its command"))
		}
		hc, err := updatedCheck(base, u.Cmd, u.Interval, u.Timeout, u.StartPeriod, "health_")
		if err != nil {
			return err
		}
		if u.Retries != nil {
			if *u.Retries < 1 {
				return InvalidArgument("health_retries", errors.New("must be greater than 0"))
			}
			hc.Retries = int(*u.Retries)
		}
		next.HealthConfig = &hc
	}
	if u.startup() {
		var base StartupHealthConfig
		if sc := s.StartupHealthConfig; sc != nil {
			base = *sc
		} else {
			base.Interval, base.Timeout = defaultHealthInterval, defaultHealthTimeout
			if u.StartupCmd == nil {
				return InvalidArgument("health_startup_cmd", errors.New("the container has no startup healthcheck: give its command"))
			}
		}
		hc, err := updatedCheck(base.HealthConfig, u.StartupCmd, u.StartupInterval, u.StartupTimeout, nil, "health_startup_")
		if err != nil {
			return err
		}
		base.HealthConfig = hc
		if u.StartupRetries != nil {
			base.Retries = int(*u.StartupRetries)
		}
		if u.StartupSuccess != nil {
			base.Successes = int(*u.StartupSuccess)
		}
		next.StartupHealthConfig = &base
	}
	if u.OnFailure != nil {
		a, err := ParseHealthOnFailure(*u.OnFailure)
		if err != nil {
			return InvalidArgument("health_on_failure", err)
		}
		next.HealthCheckOnFailureAction = a
	}
	if u.LogDestination != nil {
		next.HealthLogDestination = *u.LogDestination
	}
	if u.MaxLogCount != nil {
		next.HealthMaxLogCount = u.MaxLogCount
	}
	if u.MaxLogSize != nil {
		next.HealthMaxLogSize = u.MaxLogSize
	}
	if err := next.ValidateHealth(); err != nil {
		return err
	}
	*s = next
	return nil
}

func hasHealthCommand(hc *HealthConfig) bool {
	return hc != nil && len(hc.Test) > 0 && hc.Test[0] != "NONE"
}

// updatedCheck is base with the given command and durations in place.
func updatedCheck(base HealthConfig, cmd, interval, timeout, startPeriod *string, prefix string) (HealthConfig, error) {
	if cmd != nil {
		test, err := HealthTest(*cmd)
		if err != nil {
			return base, InvalidArgument(prefix+"cmd", err)
		}
		base.Test = test
	}
	if interval != nil {
		text := *interval
		if text == "disable" {
			text = "0s"
		}
		d, err := time.ParseDuration(text)
		if err != nil || d < 0 {
			return base, InvalidArgument(prefix+"interval", fmt.Errorf("%q is not a duration of 0 or more, nor disable", *interval))
		}
		base.Interval = d
	}
	if timeout != nil {
		d, err := time.ParseDuration(*timeout)
		if err != nil || d <= 0 {
			return base, InvalidArgument(prefix+"timeout", fmt.Errorf("%q is not a positive duration", *timeout))
		}
		base.Timeout = d
	}
	if startPeriod != nil {
		d, err := time.ParseDuration(*startPeriod)
		if err != nil || d < 0 {
			return base, InvalidArgument(prefix+"start_period", fmt.Errorf("%q is not a duration of 0 or more", *startPeriod))
		}
		base.StartPeriod = d
	}
	return base, nil
}

// HealthTest turns a healthcheck command as podman's --health-cmd takes it
// into the check's Test: a JSON array of several words runs them directly
// (CMD), anything else through the shell (CMD-SHELL); a leading CMD,
// CMD-SHELL or NONE is kept as written, and NONE alone disables the check.
func HealthTest(cmd string) ([]string, error) {
	if strings.TrimSpace(cmd) == "" {
		return nil, errors.New("a healthcheck needs a command")
	}
	var words []string
	if err := json.Unmarshal([]byte(cmd), &words); err == nil {
		if len(words) == 0 || words[0] == "" {
			return nil, errors.New("a healthcheck needs a command")
		}
		switch strings.ToUpper(words[0]) {
		case "NONE":
			return []string{"NONE"}, nil
		case "CMD", "CMD-SHELL":
			if len(words) < 2 {
				return nil, fmt.Errorf("%s needs a command after it", words[0])
			}
			return words, nil
		}
		if len(words) > 1 {
			return append([]string{"CMD"}, words...), nil
		}
		return []string{"CMD-SHELL", words[0]}, nil
	}
	first, rest, _ := strings.Cut(strings.TrimSpace(cmd), " ")
	switch strings.ToUpper(first) {
	case "NONE":
		return []string{"NONE"}, nil
	case "CMD":
		words = strings.Fields(rest)
		if len(words) == 0 {
			return nil, errors.New("CMD needs a command after it")
		}
		return append([]string{"CMD"}, words...), nil
	case "CMD-SHELL":
		if strings.TrimSpace(rest) == "" {
			return nil, errors.New("CMD-SHELL needs a command after it")
		}
		return []string{"CMD-SHELL", strings.TrimSpace(rest)}, nil
	}
	return []string{"CMD-SHELL", cmd}, nil
}

// ParseHealthOnFailure reads an on-failure action by name.
func ParseHealthOnFailure(name string) (HealthOnFailure, error) {
	for _, a := range []HealthOnFailure{HealthOnFailureNone, HealthOnFailureKill, HealthOnFailureRestart, HealthOnFailureStop} {
		if a.String() == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%q is not none, kill, restart or stop", name)
}
