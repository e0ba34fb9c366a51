package dockerapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// dockerNetworkName is the name Docker clients know a network by: the
// engine's default network is Docker's "bridge".
func (s *server) dockerNetworkName(name string) string {
	if name == s.cfg.DefaultNetwork {
		return "bridge"
	}
	return name
}

// engineNetwork is the engine's name for a network a Docker client names.
func (s *server) engineNetwork(name string) string {
	if name == "bridge" || name == "default" {
		return s.cfg.DefaultNetwork
	}
	return name
}

// dockerState maps the engine's state names to Docker's (created,
// running, paused, restarting, removing, exited, dead).
func dockerState(state string) string {
	switch state {
	case "configured", "initialized", "created":
		return "created"
	case "stopped", "exited":
		return "exited"
	case "running", "paused", "removing":
		return state
	}
	return state
}

// statusText is Docker's human status of a container ("Up 3 minutes").
func statusText(state string, started, finished time.Time, exitCode int32, health string) string {
	now := time.Now()
	switch dockerState(state) {
	case "running":
		s := "Up " + humanDuration(now.Sub(started))
		if health != "" {
			s += " (" + health + ")"
		}
		return s
	case "paused":
		return "Up " + humanDuration(now.Sub(started)) + " (Paused)"
	case "exited":
		if finished.IsZero() {
			return fmt.Sprintf("Exited (%d)", exitCode)
		}
		return fmt.Sprintf("Exited (%d) %s ago", exitCode, humanDuration(now.Sub(finished)))
	case "removing":
		return "Removal In Progress"
	}
	return "Created"
}

// humanDuration renders a duration the way Docker's status column does.
func humanDuration(d time.Duration) string {
	switch seconds := int(d.Seconds()); {
	case seconds < 1:
		return "Less than a second"
	case seconds == 1:
		return "1 second"
	case seconds < 60:
		return fmt.Sprintf("%d seconds", seconds)
	}
	switch minutes := int(d.Minutes()); {
	case minutes == 1:
		return "About a minute"
	case minutes < 60:
		return fmt.Sprintf("%d minutes", minutes)
	}
	switch hours := int(d.Hours() + 0.5); {
	case hours == 1:
		return "About an hour"
	case hours < 48:
		return fmt.Sprintf("%d hours", hours)
	case hours < 24*7*2:
		return fmt.Sprintf("%d days", hours/24)
	case hours < 24*30*2:
		return fmt.Sprintf("%d weeks", hours/24/7)
	case hours < 24*365*2:
		return fmt.Sprintf("%d months", hours/24/30)
	default:
		return fmt.Sprintf("%d years", int(d.Hours())/24/365)
	}
}

// parseTime reads Docker's time parameters: Unix seconds (with an optional
// fraction), RFC 3339, or a duration counted back from now ("10m").
func parseTime(v string, now time.Time) (time.Time, error) {
	if secs, frac, ok := strings.Cut(v, "."); ok || secs != "" {
		if s, err := strconv.ParseInt(secs, 10, 64); err == nil {
			var ns int64
			if ok {
				frac = (frac + "000000000")[:9]
				if ns, err = strconv.ParseInt(frac, 10, 64); err != nil {
					return time.Time{}, fmt.Errorf("%q is not a time", v)
				}
			}
			return time.Unix(s, ns), nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a Unix time, RFC 3339 time or duration", v)
}

// dockerTime formats inspect's times; the zero time is Docker's.
func dockerTime(t time.Time) string {
	if t.IsZero() {
		return "0001-01-01T00:00:00Z"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// imageID is an image ID as Docker shows it.
func imageID(id string) string {
	if id == "" || strings.HasPrefix(id, "sha256:") {
		return id
	}
	return "sha256:" + id
}
