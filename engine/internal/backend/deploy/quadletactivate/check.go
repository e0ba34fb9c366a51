package quadletactivate

import (
	"fmt"
	"path/filepath"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
)

// activatedKeys are the keys of each quadlet section that activation
// honours (see translate.go). The installer accepts all of Podman's keys
// for units that are only kept; a unit to activate with any other key is
// refused, so no key of an activated unit is ignored.
var activatedKeys = map[string]map[string]bool{
	"Container": set("AddCapability", "AddHost", "Annotation", "ContainerName", "DNS", "DNSOption", "DNSSearch",
		"DropCapability", "Entrypoint", "Environment", "EnvironmentFile", "Exec", "HealthCmd", "HealthInterval",
		"HealthRetries", "HealthStartPeriod", "HealthTimeout", "HostName", "Image", "Label", "Network", "NetworkAlias",
		"NoNewPrivileges", "Notify", "Pod", "PublishPort", "Pull", "ReadOnly", "RunInit", "Secret", "ServiceName",
		"StopTimeout", "Sysctl", "Timezone", "Tmpfs", "User", "Group", "Volume", "WorkingDir",
		"Memory", "PidsLimit", "ShmSize", "Ulimit", "StopSignal", "LogDriver", "LogOpt", "GroupAdd", "AddDevice",
		"Mask", "Unmask", "Mount", "UserNS"),
	"Network": set("DNS", "DisableDNS", "Driver", "Gateway", "IPv6", "InterfaceName", "Internal", "Label",
		"NetworkName", "Options", "ServiceName", "Subnet"),
	"Volume": set("Device", "Driver", "Label", "Options", "ServiceName", "Type", "VolumeName"),
	"Image":  set("AllTags", "Arch", "Image", "ImageTag", "OS", "Policy", "ServiceName", "TLSVerify", "Variant"),
	"Pod": set("AddHost", "DNS", "DNSOption", "DNSSearch", "HostName", "Label", "Network", "PodName",
		"PublishPort", "ServiceName", "ShmSize", "UserNS"),
	"Build": set("Annotation", "Arch", "BuildArg", "File", "ImageTag", "Label", "Pull", "ServiceName",
		"SetWorkingDirectory", "Target"),
	"Kube":    set("KubeDownForce", "Network", "PublishPort", "ServiceName", "Yaml"),
	"Quadlet": set("DefaultDependencies"),
	// systemd's own sections: descriptions, ordering and boot targets are
	// systemd's business (activation orders units by their references and
	// starts them when activated); Restart= maps to a restart policy and
	// TimeoutStartSec= bounds the activation.
	"Unit":    set("Description", "Documentation", "After", "Before", "Wants", "Requires", "BindsTo", "PartOf"),
	"Install": set("WantedBy", "RequiredBy", "Alias", "Also"),
	"Service": set("Restart", "TimeoutStartSec"),
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// Check refuses what activation cannot do with unit file name (already
// valid for the installer): keys it does not honour and values it cannot
// translate. It reads no engine state: references to other units are
// checked when the unit is activated.
func Check(name string, data []byte) error {
	u := parseUnit(name, name, data)
	u.dry = true
	for _, e := range u.entries {
		if len(e.Section) > 2 && e.Section[:2] == "X-" {
			continue
		}
		keys, known := activatedKeys[e.Section]
		if !known {
			return u.errAt(e, fmt.Errorf("section [%s] is not supported by activation", e.Section))
		}
		if !keys[e.Key] {
			return u.errAt(e, fmt.Errorf("not supported by activation (supported in a %s unit: see docs/engine/quadlets.md)", filepath.Ext(name)))
		}
	}
	for _, e := range u.allIn("Service", "Restart") {
		// Only a container is restarted by the engine; the other kinds
		// are made once.
		if _, err := quadlets.RestartPolicy(u.kind, e.Value); err != nil {
			return u.errAt(e, err)
		}
	}
	if u.kind == "Container" {
		if v, ok := u.last("Notify"); ok {
			if b, isBool := quadlets.ParseBool(v); !isBool || b {
				return u.errAt(u.all("Notify")[0], fmt.Errorf("Notify=%s: no systemd waits for the container (only false)", v))
			}
		}
	}
	_, err := translate(u, dryResolver{})
	return err
}

// dryResolver names referenced units without looking them up.
type dryResolver struct{}

func (dryResolver) object(_ *unit, _ quadlets.Entry, ref string) (string, error) {
	return "systemd-" + trimExt(ref), nil
}

func trimExt(name string) string { return name[:len(name)-len(filepath.Ext(name))] }
