package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// Nothing in a creation request is silently ignored: every member of
// Podman's SpecGenerator JSON that a client sends either takes effect (a
// member of core.ContainerSpec), holds a value that matches what the engine
// does anyway (specDefaults), or is refused with a 400 naming it. A member
// whose value is JSON's zero (null, false, 0, "", [], {}) asks for nothing
// and passes.

// specMembers are the JSON names of core.ContainerSpec's fields: the
// members that take effect.
var specMembers = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(core.ContainerSpec{})
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}()

// specDefaults are members the engine has no field for, with the values it
// honours without one: what podman --remote 4.3.1 sends by default, which
// describes what the engine does anyway. Any other value is refused.
var specDefaults = map[string]func(json.RawMessage) error{
	// The engine runs no systemd mode: "true" only enables it for a command
	// that is systemd or init, which the engine then runs as any command.
	"systemd":      stringIn("true", "false"),
	"sdnotifyMode": stringIn("container", "ignore"),
	// Storage is always volatile (see docs/engine/containers.md).
	"volatile": boolIs(true),
	// The engine applies no SELinux label: label=disable asks for what it
	// does (any other SELinux option would go unhonoured).
	"selinux_opts": stringsIn("disable"),
}

// specRefusedValues are values of members the engine has a field for but
// cannot honour yet; the member is named in the 400.
var specRefusedValues = map[string]func(json.RawMessage) error{
	// Podman's --cgroups: an unknown mode is refused here; whether the
	// engine's runtime and host honour disabled and split is the
	// containers backend's to say.
	"cgroups_mode": func(raw json.RawMessage) error {
		var mode string
		if err := json.Unmarshal(raw, &mode); err != nil {
			return err
		}
		return core.CheckCgroupsMode(mode)
	},
}

// checkSpecMembers refuses the members of a creation request that would
// otherwise be ignored, naming the first one (in name order).
func checkSpecMembers(members map[string]json.RawMessage) error {
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := members[name]
		if name == "" && !isZeroJSON(raw) {
			return core.InvalidArgument("body", errors.New("a member has an empty name"))
		}
		if check, ok := specRefusedValues[name]; ok {
			if err := check(raw); err != nil {
				return core.InvalidArgument(name, err)
			}
		}
		if specMembers[name] || isZeroJSON(raw) {
			continue
		}
		check, ok := specDefaults[name]
		if !ok {
			return core.InvalidArgument(name, errors.New("this engine does not support it"))
		}
		if err := check(raw); err != nil {
			return core.InvalidArgument(name, err)
		}
	}
	return nil
}

// isZeroJSON reports whether raw is null, false, 0, "", an empty array or
// an empty object. An object with members is not zero even when their values
// are (a map's keys carry meaning: {"default": {}} names a network).
func isZeroJSON(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return true
	}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		return json.Unmarshal(raw, &m) == nil && len(m) == 0
	case '[':
		var a []json.RawMessage
		return json.Unmarshal(raw, &a) == nil && len(a) == 0
	case '"':
		return string(raw) == `""`
	case 'n':
		return string(raw) == "null"
	case 'f':
		return string(raw) == "false"
	default:
		var n float64
		return json.Unmarshal(raw, &n) == nil && n == 0
	}
}

func stringIn(allowed ...string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return errors.New("expected a string")
		}
		for _, a := range allowed {
			if s == a {
				return nil
			}
		}
		return fmt.Errorf("%q is not supported (%s)", s, strings.Join(allowed, ", "))
	}
}

// stringsIn accepts a list of strings each of which is allowed.
func stringsIn(allowed ...string) func(json.RawMessage) error {
	one := stringIn(allowed...)
	return func(raw json.RawMessage) error {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return errors.New("expected a list of strings")
		}
		for _, item := range list {
			if err := one(item); err != nil {
				return err
			}
		}
		return nil
	}
}

func boolIs(want bool) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return errors.New("expected a boolean")
		}
		if b != want {
			return fmt.Errorf("only %t is supported", want)
		}
		return nil
	}
}
