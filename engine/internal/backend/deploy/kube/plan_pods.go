package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// DeploymentPodName is the name of a Deployment's i-th pod, as Podman 4 names it.
func DeploymentPodName(deployment string, i int) string {
	return fmt.Sprintf("%s-pod-%d", deployment, i)
}

type podTemplate struct {
	name        string
	meta        metav1.ObjectMeta
	spec        v1.PodSpec
	path        string
	annotations map[string]string
}

func (pl *planner) pod(ctx context.Context, d *document, t podTemplate, out *plan, volumeFiles map[string]bool) (*podPlan, error) {
	if !validName(t.name) {
		return nil, d.fail("metadata.name", fmt.Errorf("pod name %q is not valid", t.name))
	}
	spec := t.spec
	annotations := map[string]string{}
	for k, v := range t.annotations {
		annotations[k] = v
	}
	for k, v := range t.meta.Annotations {
		annotations[k] = v
	}
	for k, v := range pl.opts.Annotations {
		annotations[k] = v
	}
	for k, v := range annotations {
		if len(v) > 63 && !strings.HasPrefix(k, "io.podman") {
			return nil, d.fail("metadata.annotations", fmt.Errorf("the value of %q exceeds 63 characters", k))
		}
		if err := checkSdNotify(k, v); err != nil {
			return nil, d.fail("metadata.annotations", err)
		}
	}
	labels := t.meta.Labels
	pp := &podPlan{doc: d, name: t.name}
	pp.spec = core.PodSpec{
		Name:             t.name,
		Hostname:         spec.Hostname,
		Labels:           labels,
		ExitPolicy:       core.PodExitPolicyStop,
		SharedNamespaces: []string{core.PodShareIPC, core.PodShareNet, core.PodShareUTS},
	}
	if pp.spec.Hostname == "" {
		pp.spec.Hostname = t.name
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace {
		if spec.HostPID {
			return nil, d.fail(t.path+".hostPID", errors.New("cannot be combined with shareProcessNamespace"))
		}
		pp.spec.SharedNamespaces = append(pp.spec.SharedNamespaces, core.PodSharePID)
	}
	if spec.HostIPC {
		// Its containers join the host's IPC namespace instead of the pod's.
		pp.spec.SharedNamespaces = slices.DeleteFunc(pp.spec.SharedNamespaces, func(ns string) bool { return ns == core.PodShareIPC })
	}
	// hostUsers: false (and kube play --userns=auto) give the pod a user
	// namespace of its own, from the engine's automatic ranges: its infra
	// container holds it and every container joins it (see pods).
	if spec.HostUsers != nil && !*spec.HostUsers || strings.HasPrefix(pl.opts.Userns, core.UserNSAuto) {
		if spec.HostNetwork || spec.HostIPC || spec.HostPID {
			return nil, d.fail(t.path+".hostUsers", errors.New("a user namespace of the pod's own cannot be combined with hostNetwork, hostIPC or hostPID"))
		}
		pp.spec.UserNS = core.Namespace{NSMode: core.UserNSAuto}
		if _, opts, ok := strings.Cut(pl.opts.Userns, ":"); ok {
			pp.spec.UserNS.Value = opts
		}
	}
	for _, ha := range spec.HostAliases {
		if net.ParseIP(ha.IP) == nil {
			return nil, d.fail(t.path+".hostAliases", fmt.Errorf("%q is not an IP address", ha.IP))
		}
		for _, h := range ha.Hostnames {
			pp.spec.HostAdd = append(pp.spec.HostAdd, h+":"+ha.IP)
		}
	}
	if dc := spec.DNSConfig; dc != nil {
		for _, s := range dc.Nameservers {
			if net.ParseIP(s) == nil {
				return nil, d.fail(t.path+".dnsConfig.nameservers", fmt.Errorf("%q is not an IP address", s))
			}
		}
		pp.spec.DNSServers = dc.Nameservers
		pp.spec.DNSSearch = dc.Searches
	}
	if err := pl.network(d, t, pp); err != nil {
		return nil, err
	}
	ports, err := pl.ports(d, t)
	if err != nil {
		return nil, err
	}
	if spec.HostNetwork && len(ports) > 0 {
		return nil, d.fail(t.path+".containers.ports", errors.New("ports cannot be published with hostNetwork"))
	}
	pp.spec.PortMappings = ports

	restart := core.RestartPolicyAlways
	switch spec.RestartPolicy {
	case "", v1.RestartPolicyAlways:
	case v1.RestartPolicyOnFailure:
		restart = core.RestartPolicyOnFailure
	case v1.RestartPolicyNever:
		restart = core.RestartPolicyNo
	default:
		return nil, d.fail(t.path+".restartPolicy", fmt.Errorf("%q is not Always, OnFailure or Never", spec.RestartPolicy))
	}
	mounts, err := pl.volumes(ctx, d, t, pp, out, volumeFiles)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for i, c := range spec.InitContainers {
		field := fmt.Sprintf("%s.initContainers[%d]", t.path, i)
		for probeField, set := range map[string]bool{"livenessProbe": c.LivenessProbe != nil, "readinessProbe": c.ReadinessProbe != nil, "startupProbe": c.StartupProbe != nil} {
			if set {
				return nil, d.fail(field+"."+probeField, errors.New("an init container runs to completion: it has no probes"))
			}
		}
		cs, err := pl.container(ctx, d, t, field, c, names, mounts, annotations, labels)
		if err != nil {
			return nil, err
		}
		cs.RestartPolicy = core.RestartPolicyNo
		if cs.InitContainerType, err = initContainerType(annotations, c.Name); err != nil {
			return nil, d.fail("metadata.annotations", err)
		}
		pp.initContainers = append(pp.initContainers, cs)
	}
	if len(spec.Containers) == 0 {
		return nil, d.fail(t.path+".containers", errors.New("a pod needs at least one container"))
	}
	for i, c := range spec.Containers {
		cs, err := pl.container(ctx, d, t, fmt.Sprintf("%s.containers[%d]", t.path, i), c, names, mounts, annotations, labels)
		if err != nil {
			return nil, err
		}
		cs.RestartPolicy = restart
		// A failing liveness probe restarts the container where the pod
		// restarts its containers (Always, OnFailure), as Podman maps it.
		if c.LivenessProbe != nil && restart != core.RestartPolicyNo {
			cs.HealthCheckOnFailureAction = core.HealthOnFailureRestart
		}
		if c.LivenessProbe != nil && c.ReadinessProbe != nil {
			// Podman 4.3.1 drops readiness probes without a word.
			pp.logs = append(pp.logs, fmt.Sprintf("container %s: readinessProbe not applied: a container has one healthcheck, which is its livenessProbe "+
				"(and no Service endpoints a readiness probe would gate)\n", c.Name))
		}
		pp.containers = append(pp.containers, cs)
	}
	return pp, nil
}

// InitContainerTypeAnnotation chooses the type of a pod's init containers
// (always or once; once by default), as Podman's kube play reads it; the
// engine also reads it suffixed "/CONTAINER" for one init container, which
// is how kube generate writes it.
const InitContainerTypeAnnotation = "io.podman.annotations.init.container.type"

func initContainerType(annotations map[string]string, container string) (string, error) {
	key := InitContainerTypeAnnotation + "/" + container
	typ, ok := annotations[key]
	if !ok {
		key = InitContainerTypeAnnotation
		typ = annotations[key]
	}
	switch typ {
	case "":
		return core.InitContainerOnce, nil
	case core.InitContainerAlways, core.InitContainerOnce:
		return typ, nil
	}
	return "", fmt.Errorf("%s: %q is not always or once", key, typ)
}

// SdNotifyAnnotation is Podman's sd-notify mode annotation, for all
// containers or, suffixed "/CONTAINER", for one.
const SdNotifyAnnotation = "io.containers.sdnotify"

// checkSdNotify refuses sd-notify modes the engine cannot honour: they
// pass a NOTIFY_SOCKET (the client's systemd's) to conmon or the
// container, and the engine, serving an API, has none for a play. "ignore"
// asks for nothing and is what the engine does.
func checkSdNotify(key, value string) error {
	if key != SdNotifyAnnotation && !strings.HasPrefix(key, SdNotifyAnnotation+"/") {
		return nil
	}
	switch value {
	case "ignore":
		return nil
	case "container", "conmon":
		return fmt.Errorf("%s: sd-notify mode %q needs a NOTIFY_SOCKET, which a play through the engine's API does not have (only \"ignore\" is honoured)", key, value)
	}
	return fmt.Errorf("%s: %q is not an sd-notify mode (conmon, container, ignore)", key, value)
}

// network sets the pod's network namespace, networks and static addresses.
func (pl *planner) network(d *document, t podTemplate, pp *podPlan) error {
	if t.spec.HostNetwork {
		pp.spec.NetNS = core.Namespace{NSMode: core.NetNSHost}
		return nil
	}
	nets := pl.opts.Networks
	if len(nets) == 0 {
		nets = []string{DefaultNetwork}
	}
	idx := pl.ipIndex
	pl.ipIndex++
	switch nets[0] {
	case core.NetNSHost, core.NetNSNone, core.NetNSPrivate:
		if len(nets) > 1 {
			return core.InvalidArgument("network", fmt.Errorf("%q cannot be combined with other networks", nets[0]))
		}
		if idx < len(pl.opts.StaticIPs) || idx < len(pl.opts.StaticMACs) {
			return core.InvalidArgument("staticIPs", errors.New("static addresses need a bridge network"))
		}
		pp.spec.NetNS = core.Namespace{NSMode: nets[0]}
		return nil
	case core.NetNSBridge:
		nets = []string{DefaultNetwork}
		if len(pl.opts.Networks) > 1 {
			return core.InvalidArgument("network", errors.New("bridge cannot be combined with other networks"))
		}
	}
	pp.spec.NetNS = core.Namespace{NSMode: core.NetNSBridge}
	pp.spec.Networks = map[string]core.PerNetworkOptions{}
	for _, n := range nets {
		pp.spec.Networks[n] = core.PerNetworkOptions{}
	}
	if idx < len(pl.opts.StaticIPs) || idx < len(pl.opts.StaticMACs) {
		if len(nets) != 1 {
			return core.InvalidArgument("staticIPs", errors.New("static addresses need exactly one network"))
		}
		o := core.PerNetworkOptions{}
		if idx < len(pl.opts.StaticIPs) {
			o.StaticIPs = []net.IP{pl.opts.StaticIPs[idx]}
		}
		if idx < len(pl.opts.StaticMACs) {
			o.StaticMAC = core.HardwareAddr(pl.opts.StaticMACs[idx])
		}
		pp.spec.Networks[nets[0]] = o
	}
	return nil
}

// ports are the pod's published ports: hostPorts, every container port
// with publishAllPorts, and the request's publishPorts.
func (pl *planner) ports(d *document, t podTemplate) ([]core.PortMapping, error) {
	var out []core.PortMapping
	seen := map[string]bool{}
	add := func(m core.PortMapping) {
		key := fmt.Sprintf("%s/%d/%s", m.HostIP, m.HostPort, m.Protocol)
		if !seen[key] {
			seen[key] = true
			out = append(out, m)
		}
	}
	for i, c := range t.spec.Containers {
		for j, p := range c.Ports {
			field := fmt.Sprintf("%s.containers[%d].ports[%d]", t.path, i, j)
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			if proto != "tcp" && proto != "udp" && proto != "sctp" {
				return nil, d.fail(field+".protocol", fmt.Errorf("%q is not TCP, UDP or SCTP", p.Protocol))
			}
			if p.ContainerPort < 0 || p.ContainerPort > 65535 || p.HostPort < 0 || p.HostPort > 65535 {
				return nil, d.fail(field, errors.New("ports are 1..65535"))
			}
			if p.HostIP != "" && net.ParseIP(p.HostIP) == nil {
				return nil, d.fail(field+".hostIP", fmt.Errorf("%q is not an IP address", p.HostIP))
			}
			cport, hport := p.ContainerPort, p.HostPort
			if cport == 0 {
				cport = hport
			}
			if hport == 0 && pl.opts.PublishAllPorts {
				hport = cport
			}
			if hport == 0 {
				continue
			}
			add(core.PortMapping{HostIP: p.HostIP, ContainerPort: uint16(cport), HostPort: uint16(hport), Protocol: proto})
		}
	}
	for _, spec := range pl.opts.PublishPorts {
		m, err := parsePublish(spec)
		if err != nil {
			return nil, core.InvalidArgument("publishPorts", err)
		}
		add(m)
	}
	return out, nil
}

// parsePublish reads "[[ip:]hostPort:]containerPort[/proto]".
func parsePublish(s string) (core.PortMapping, error) {
	m := core.PortMapping{Protocol: "tcp"}
	rest := s
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		m.Protocol = strings.ToLower(rest[i+1:])
		rest = rest[:i]
		if m.Protocol != "tcp" && m.Protocol != "udp" && m.Protocol != "sctp" {
			return m, fmt.Errorf("%q: protocol is tcp, udp or sctp", s)
		}
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return m, fmt.Errorf("%q is not [[ip:]hostPort:]containerPort[/protocol]", s)
	}
	port := func(p string) (uint16, error) {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("%q: %q is not a port", s, p)
		}
		return uint16(n), nil
	}
	var err error
	if m.ContainerPort, err = port(parts[len(parts)-1]); err != nil {
		return m, err
	}
	m.HostPort = m.ContainerPort
	if len(parts) >= 2 {
		if m.HostPort, err = port(parts[len(parts)-2]); err != nil {
			return m, err
		}
	}
	if len(parts) == 3 {
		if net.ParseIP(parts[0]) == nil {
			return m, fmt.Errorf("%q: %q is not an IP address", s, parts[0])
		}
		m.HostIP = parts[0]
	}
	return m, nil
}
