package cdi

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// diagnose names the field that makes a spec file fail to load, for the
// message a client gets: the library's own errors name the device at best
// ("invalid (empty) device path"), and sometimes only a consequence
// ("invalid vendor. empty name" for a kind that is a number). It returns ""
// where it finds nothing more precise to say than the library.
func diagnose(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "not YAML or JSON: " + err.Error()
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return "the document is not an object"
	}
	if v, ok := top["cdiVersion"].(string); !ok || v == "" {
		return "cdiVersion: missing or not a string"
	}
	kind, ok := top["kind"].(string)
	if !ok {
		return "kind: missing or not a string (vendor.com/class)"
	}
	if p := kindProblem(kind); p != "" {
		return "kind: " + p
	}
	if p := editsProblem("containerEdits", top["containerEdits"]); p != "" {
		return p
	}
	devices, ok := top["devices"].([]any)
	if !ok || len(devices) == 0 {
		return "devices: missing or empty"
	}
	for i, d := range devices {
		field := fmt.Sprintf("devices[%d]", i)
		dev, ok := d.(map[string]any)
		if !ok {
			return field + ": not an object"
		}
		name, ok := dev["name"].(string)
		if !ok || name == "" {
			return field + ".name: missing or not a string (a YAML null or number must be quoted)"
		}
		if err := parser.ValidateDeviceName(name); err != nil {
			return fmt.Sprintf("%s.name: %v", field, err)
		}
		if _, ok := dev["containerEdits"]; !ok {
			return field + ".containerEdits: missing"
		}
		if p := editsProblem(field+".containerEdits", dev["containerEdits"]); p != "" {
			return p
		}
	}
	return ""
}

// editsProblem checks one containerEdits object (absent is fine).
func editsProblem(field string, v any) string {
	if v == nil {
		return ""
	}
	edits, ok := v.(map[string]any)
	if !ok {
		return field + ": not an object"
	}
	if env, ok := edits["env"]; ok {
		list, ok := env.([]any)
		if !ok {
			return field + ".env: not a list"
		}
		for i, e := range list {
			if s, ok := e.(string); !ok || !strings.Contains(s, "=") {
				return fmt.Sprintf("%s.env[%d]: %v is not NAME=value", field, i, e)
			}
		}
	}
	checks := []struct {
		key      string
		required []string
	}{
		{"deviceNodes", []string{"path"}},
		{"mounts", []string{"hostPath", "containerPath"}},
		{"hooks", []string{"hookName", "path"}},
	}
	for _, c := range checks {
		raw, ok := edits[c.key]
		if !ok {
			continue
		}
		list, ok := raw.([]any)
		if !ok {
			return fmt.Sprintf("%s.%s: not a list", field, c.key)
		}
		for i, item := range list {
			obj, ok := item.(map[string]any)
			if !ok {
				return fmt.Sprintf("%s.%s[%d]: not an object", field, c.key, i)
			}
			for _, req := range c.required {
				if s, ok := obj[req].(string); !ok || s == "" {
					return fmt.Sprintf("%s.%s[%d].%s: missing or empty", field, c.key, i, req)
				}
			}
		}
	}
	return ""
}

// kindProblem says what is wrong with a kind ("vendor.com/class"), ""
// when nothing. A one-character vendor or class is refused here: the
// library's validation (v1.1.0) indexes past the end of such a name and
// panics.
func kindProblem(kind string) string {
	vendor, class := parser.ParseQualifier(kind)
	switch {
	case vendor == "":
		return fmt.Sprintf("%q is not vendor.com/class", kind)
	case len(vendor) < 2 || len(class) < 2:
		return fmt.Sprintf("%q: the vendor and the class need two characters or more", kind)
	}
	if err := parser.ValidateVendorName(vendor); err != nil {
		return err.Error()
	}
	if err := parser.ValidateClassName(class); err != nil {
		return err.Error()
	}
	return ""
}
