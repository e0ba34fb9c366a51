package pods

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// defaultShared are the namespaces a pod shares unless the request says.
var defaultShared = []string{core.PodShareIPC, core.PodShareNet, core.PodShareUTS}

// normalize validates a creation request and applies the defaults: the
// hostname is the pod's name, the pod shares ipc, net and uts, the exit
// policy is continue, members live under the pod's cgroup. Everything the
// engine cannot honour is refused, naming the field.
func normalize(spec *core.PodSpec) error {
	if spec.Name != "" && !validName.MatchString(spec.Name) {
		return core.InvalidArgument("name", fmt.Errorf("%q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", spec.Name))
	}
	if spec.Hostname != "" && (len(spec.Hostname) > 64 || strings.ContainsAny(spec.Hostname, " /\t\n\x00")) {
		return core.InvalidArgument("hostname", fmt.Errorf("%q is not a valid hostname", spec.Hostname))
	}
	switch spec.ExitPolicy {
	case "":
		spec.ExitPolicy = core.PodExitPolicyContinue
	case core.PodExitPolicyContinue, core.PodExitPolicyStop:
	default:
		return core.InvalidArgument("exit_policy", fmt.Errorf("%q is not continue or stop", spec.ExitPolicy))
	}
	if err := core.ValidateRestartPolicy(spec.RestartPolicy, spec.RestartTries); err != nil {
		return err
	}
	if spec.InfraName != "" && !validName.MatchString(spec.InfraName) {
		return core.InvalidArgument("infra_name", fmt.Errorf("%q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", spec.InfraName))
	}
	if err := refuseUnsupported(spec); err != nil {
		return err
	}
	mounts, err := core.FoldOverlayVolumes("overlay_volumes", spec.OverlayVolumes, spec.Mounts)
	if err != nil {
		return err
	}
	spec.Mounts, spec.OverlayVolumes = mounts, nil
	if err := checkMemberStorage(spec); err != nil {
		return err
	}
	if _, err := core.ParsePodSecurity(spec.SecurityOpt); err != nil {
		return err
	}
	if err := normalizeResources(spec); err != nil {
		return err
	}
	if err := checkNamespaces(spec); err != nil {
		return err
	}
	if spec.ShareParent == nil {
		t := true
		spec.ShareParent = &t
	}
	if spec.NoInfra {
		for field, set := range map[string]bool{
			"infra_command": len(spec.InfraCommand) > 0, "infra_image": spec.InfraImage != "", "infra_name": spec.InfraName != "",
			"shared_namespaces": len(spec.SharedNamespaces) > 0, "netns": spec.NetNS.NSMode != "",
			"dns_server": len(spec.DNSServers) > 0, "dns_search": len(spec.DNSSearch) > 0, "dns_option": len(spec.DNSOptions) > 0,
			"hostadd": len(spec.HostAdd) > 0, "hostname": spec.Hostname != "",
			"portmappings": len(spec.PortMappings) > 0, "Networks": len(spec.Networks) > 0,
			"cni_networks": len(spec.CNINetworks) > 0, "network_options": len(spec.NetworkOptions) > 0,
			"shm_size": spec.ShmSize != nil,
		} {
			if set {
				return core.InvalidArgument(field, errors.New("a pod without an infra container cannot set it"))
			}
		}
		return nil
	}
	shared, err := sharedNamespaces(spec.SharedNamespaces)
	if err != nil {
		return err
	}
	spec.SharedNamespaces = shared
	// The infra container's /dev/shm is the one members sharing IPC bind.
	if spec.ShmSize != nil && !slices.Contains(shared, core.PodShareIPC) {
		return core.InvalidArgument("shm_size", errors.New("the pod's /dev/shm is the one of its shared IPC namespace: share ipc to size it"))
	}
	if spec.ShmSize != nil && *spec.ShmSize <= 0 {
		return core.InvalidArgument("shm_size", fmt.Errorf("%d must be positive", *spec.ShmSize))
	}
	return nil
}

// sharedNamespaces reads the share list ("none" shares nothing).
func sharedNamespaces(given []string) ([]string, error) {
	if len(given) == 0 {
		return append([]string(nil), defaultShared...), nil
	}
	out := []string{}
	for _, g := range given {
		for _, ns := range strings.Split(g, ",") {
			ns = strings.TrimSpace(ns)
			switch ns {
			case core.PodShareNet, core.PodShareIPC, core.PodShareUTS, core.PodSharePID:
				if !slices.Contains(out, ns) {
					out = append(out, ns)
				}
			case "none", "":
			default:
				return nil, core.InvalidArgument("shared_namespaces", fmt.Errorf("%q cannot be shared (net, ipc, uts, pid or none)", ns))
			}
		}
	}
	return out, nil
}

// checkNamespaces accepts the namespace modes of the infra container the
// engine can create.
func checkNamespaces(spec *core.PodSpec) error {
	switch spec.PidNS.NSMode {
	case "", "private", core.NetNSHost:
	default:
		return core.InvalidArgument("pidns", fmt.Errorf("mode %q is not supported (private or host)", spec.PidNS.NSMode))
	}
	for field, ns := range map[string]core.Namespace{"ipcns": spec.IpcNS, "utsns": spec.UtsNS} {
		if ns.NSMode != "" && ns.NSMode != "private" {
			return core.InvalidArgument(field, fmt.Errorf("mode %q is not supported (private)", ns.NSMode))
		}
	}
	if err := checkUserNS(spec); err != nil {
		return err
	}
	switch spec.NetNS.NSMode {
	case "", core.NetNSBridge, core.NetNSPrivate, core.NetNSNone, core.NetNSHost:
	default:
		return core.InvalidArgument("netns", fmt.Errorf("mode %q is not supported for pods (bridge, private, none, host)", spec.NetNS.NSMode))
	}
	return nil
}

// refuseUnsupported names the first option set that the engine does not offer.
func refuseUnsupported(spec *core.PodSpec) error {
	checks := []struct {
		field string
		set   bool
	}{
		{"no_manage_resolv_conf", spec.NoManageResolvConf},
		{"no_manage_hosts", spec.NoManageHosts},
		{"no_manage_hostname", spec.NoManageHostname},
		{"hostsFile", spec.HostsFile != ""},
		{"infra_conmon_pid_file", spec.InfraConmonPidFile != ""},
		// Sysctls are set in the infra container's namespaces, which
		// the members share: a pod without one has none to set them in.
		{"sysctl", len(spec.Sysctl) > 0 && spec.NoInfra},
		{"image_volumes", !emptyJSON(spec.ImageVolumes)},
		{"shm_size_systemd", spec.ShmSizeSystemd != nil},
		{"serviceContainerID", spec.ServiceContainerID != ""},
	}
	for _, c := range checks {
		if c.set {
			return core.InvalidArgument(c.field, errors.New("is not supported for pods by this engine"))
		}
	}
	return nil
}

// emptyJSON reports whether a raw member is absent, null, [] or {}.
func emptyJSON(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("[]")) || bytes.Equal(t, []byte("{}"))
}

// checkUserNS accepts the user namespaces a pod can have: the host's
// ("default" is the engine's default, the host's), or one of its own, which
// the infra container creates and every member joins: --userns=auto[:size=N]
// or --uidmap/--gidmap (mode private). The mode is read as a container's
// (core.ContainerSpec.UserNSMode): the same request a container could make.
func checkUserNS(spec *core.PodSpec) error {
	if spec.UserNS.NSMode == "default" {
		spec.UserNS.NSMode = ""
	}
	cs := infraUserNS(spec)
	mode, err := cs.UserNSMode()
	if err != nil {
		return err
	}
	if mode == "" {
		return nil
	}
	if spec.NoInfra {
		return core.InvalidArgument("userns", errors.New("a pod's user namespace is held by its infra container: a pod without one cannot have it"))
	}
	if mode == core.UserNSAuto {
		_, err = cs.AutoUserNSSize()
	}
	return err
}

// infraUserNS is the user namespace request of the pod's infra container.
func infraUserNS(spec *core.PodSpec) core.ContainerSpec {
	return core.ContainerSpec{UserNS: spec.UserNS, IDMappings: spec.IDMappings}
}

// checkMemberStorage checks the mounts, volumes and devices every member
// gets (-v, --mount, --device on the pod) as a container's are checked,
// so that a bad one is a 400 when the pod is made, not at each member.
func checkMemberStorage(spec *core.PodSpec) error {
	if len(spec.Mounts)+len(spec.Volumes)+len(spec.Devices) == 0 {
		return nil
	}
	for i, v := range spec.Volumes {
		if !path.IsAbs(v.Dest) || path.Clean(v.Dest) == "/" {
			return core.InvalidArgument(fmt.Sprintf("volumes[%d].Dest", i), fmt.Errorf("%q must be an absolute path other than /", v.Dest))
		}
	}
	cs := core.ContainerSpec{Image: "pod", Mounts: spec.Mounts, Volumes: spec.Volumes, Devices: core.PodDevices(spec.Devices)}
	if err := cs.Validate(); err != nil {
		return err
	}
	// The mounts as a member's would be made (destinations, types and
	// options).
	_, err := oci.Mounts(&cs, oci.Files{}, false)
	return err
}
