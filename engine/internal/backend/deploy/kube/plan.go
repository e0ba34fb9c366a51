package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-project/berth/engine/internal/core"
)

// plan is everything a play creates, worked out and checked before
// anything is created.
type plan struct {
	secrets []secretPlan
	volumes []volumePlan
	pods    []*podPlan
	// network is the default kube network to create ("" when the request
	// names its own networks).
	network string
}

type secretPlan struct {
	name   string
	data   []byte
	labels map[string]string
}

// volumePlan is a named volume: a claim's, or one filled with the files
// of a ConfigMap or Secret.
type volumePlan struct {
	name   string
	labels map[string]string
	opts   map[string]string
	// files are written into the volume (ConfigMap and Secret volumes);
	// nil for a claim.
	files map[string][]byte
	claim bool
}

type podPlan struct {
	doc            *document
	name           string
	spec           core.PodSpec
	initContainers []core.ContainerSpec
	containers     []core.ContainerSpec
	// hostDirs are hostPath directories to create (DirectoryOrCreate).
	hostDirs []string
	logs     []string
}

// planner works out a plan from the parsed documents.
type planner struct {
	p          *Player
	opts       core.KubePlayOptions
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]map[string][]byte
	claims     map[string]bool
	services   []*document
	ipIndex    int
	images     map[string]string
}

func (p *Player) plan(ctx context.Context, docs []*document, opts core.KubePlayOptions) (*plan, error) {
	pl := &planner{p: p, opts: opts, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]map[string][]byte{},
		claims: map[string]bool{}, images: map[string]string{}}
	out := &plan{}
	seen := map[string]*document{}
	for _, d := range docs {
		key := d.Kind + "/" + d.Name
		if d.Kind == kindDeployment || d.Kind == kindDaemonSet || d.Kind == kindJob {
			key = kindPod + "/" + d.Name
		}
		if first, dup := seen[key]; dup {
			return nil, d.fail("metadata.name", fmt.Errorf("%q is also the name of document %d", d.Name, first.Index))
		}
		seen[key] = d
		switch d.Kind {
		case kindConfigMap:
			pl.configMaps[d.Name] = d.ConfigMap
		case kindSecret:
			data := map[string][]byte{}
			for k, v := range d.Secret.Data {
				data[k] = v
			}
			for k, v := range d.Secret.StringData {
				data[k] = []byte(v)
			}
			pl.secrets[d.Name] = data
			js, err := json.Marshal(data)
			if err != nil {
				return nil, d.fail("data", err)
			}
			out.secrets = append(out.secrets, secretPlan{name: d.Name, data: js, labels: d.Secret.Labels})
		case kindPVC:
			pl.claims[d.Name] = true
			out.volumes = append(out.volumes, volumePlan{name: d.Name, labels: d.PVC.Labels, opts: map[string]string{}, claim: true})
		case kindService:
			pl.services = append(pl.services, d)
		}
	}
	if len(opts.Networks) == 0 {
		out.network = DefaultNetwork
	}
	volumeFiles := map[string]bool{}
	for _, d := range docs {
		var templates []podTemplate
		switch d.Kind {
		case kindPod:
			templates = []podTemplate{{name: d.Name, meta: d.Pod.ObjectMeta, spec: d.Pod.Spec, path: "spec"}}
		case kindDeployment:
			replicas := int32(1)
			if d.Deployment.Spec.Replicas != nil {
				replicas = *d.Deployment.Spec.Replicas
			}
			if replicas < 0 || replicas > 100 {
				return nil, d.fail("spec.replicas", fmt.Errorf("%d is outside 0..100", replicas))
			}
			for i := int32(0); i < replicas; i++ {
				templates = append(templates, podTemplate{name: DeploymentPodName(d.Name, int(i)), meta: d.Deployment.Spec.Template.ObjectMeta,
					spec: d.Deployment.Spec.Template.Spec, path: "spec.template.spec", annotations: d.Deployment.Annotations})
			}
		case kindDaemonSet:
			templates = []podTemplate{{name: d.Name + "-pod", meta: d.DaemonSet.Spec.Template.ObjectMeta,
				spec: d.DaemonSet.Spec.Template.Spec, path: "spec.template.spec", annotations: d.DaemonSet.Annotations}}
		case kindJob:
			spec := d.Job.Spec.Template.Spec
			if spec.RestartPolicy == "" || spec.RestartPolicy == v1.RestartPolicyAlways {
				return nil, d.fail("spec.template.spec.restartPolicy", errors.New("a Job's pods restart OnFailure or Never"))
			}
			templates = []podTemplate{{name: d.Name + "-pod", meta: d.Job.Spec.Template.ObjectMeta,
				spec: spec, path: "spec.template.spec", annotations: d.Job.Annotations}}
		}
		for _, t := range templates {
			pp, err := pl.pod(ctx, d, t, out, volumeFiles)
			if err != nil {
				return nil, err
			}
			out.pods = append(out.pods, pp)
		}
	}
	if len(out.pods) == 0 && len(out.volumes) == 0 && len(out.secrets) == 0 {
		if len(pl.configMaps) > 0 {
			return nil, core.InvalidArgument("body", errors.New("ConfigMaps are not standalone objects: a pod must use them"))
		}
		return nil, core.InvalidArgument("body", errors.New("the YAML holds no pod, claim or secret to create"))
	}
	for _, svc := range pl.services {
		if err := pl.service(svc, out.pods); err != nil {
			return nil, err
		}
	}
	return out, nil
}

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
		pp.spec.SharedNamespaces = append(pp.spec.SharedNamespaces, core.PodSharePID)
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
	mounts, err := pl.volumes(d, t, pp, out, volumeFiles)
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

// mountSource is how a pod volume is mounted into containers.
type mountSource struct {
	hostPath string
	// device is a hostPath of type CharDevice or BlockDevice: the device
	// is given to the container at the mount path, as Podman does.
	device   string
	named    string
	tmpfs    string
	readOnly bool
	optional bool
}

func (pl *planner) volumes(d *document, t podTemplate, pp *podPlan, out *plan, volumeFiles map[string]bool) (map[string]mountSource, error) {
	mounts := map[string]mountSource{}
	for i, v := range t.spec.Volumes {
		field := fmt.Sprintf("%s.volumes[%d]", t.path, i)
		if v.Name == "" {
			return nil, d.fail(field+".name", errors.New("missing"))
		}
		if _, dup := mounts[v.Name]; dup {
			return nil, d.fail(field+".name", fmt.Errorf("%q is declared twice", v.Name))
		}
		var src mountSource
		switch {
		case v.HostPath != nil:
			hp := v.HostPath
			if !filepath.IsAbs(hp.Path) {
				return nil, d.fail(field+".hostPath.path", fmt.Errorf("%q is not an absolute path", hp.Path))
			}
			typ := v1.HostPathUnset
			if hp.Type != nil {
				typ = *hp.Type
			}
			if err := checkHostPath(hp.Path, typ); err != nil {
				return nil, d.fail(field+".hostPath", err)
			}
			if typ == v1.HostPathDirectoryOrCreate {
				pp.hostDirs = append(pp.hostDirs, hp.Path)
			}
			if typ == v1.HostPathCharDev || typ == v1.HostPathBlockDev {
				src.device = filepath.Clean(hp.Path)
				break
			}
			src.hostPath = filepath.Clean(hp.Path)
		case v.EmptyDir != nil:
			switch v.EmptyDir.Medium {
			case v1.StorageMediumDefault:
				if v.EmptyDir.SizeLimit != nil {
					return nil, d.fail(field+".emptyDir.sizeLimit", errors.New("is supported with medium Memory only"))
				}
			case v1.StorageMediumMemory:
				src.tmpfs = "rw"
				if sl := v.EmptyDir.SizeLimit; sl != nil {
					src.tmpfs += ",size=" + strconv.FormatInt(sl.Value(), 10)
				}
			default:
				return nil, d.fail(field+".emptyDir.medium", fmt.Errorf("%q is not \"\" or Memory", v.EmptyDir.Medium))
			}
		case v.PersistentVolumeClaim != nil:
			claim := v.PersistentVolumeClaim.ClaimName
			if claim == "" || !validName(claim) {
				return nil, d.fail(field+".persistentVolumeClaim.claimName", fmt.Errorf("%q is not a volume name", claim))
			}
			src.named = claim
			src.readOnly = v.PersistentVolumeClaim.ReadOnly
		case v.ConfigMap != nil:
			cm, ok := pl.configMaps[v.ConfigMap.Name]
			if !ok {
				if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
					src.optional = true
					break
				}
				return nil, d.fail(field+".configMap.name", fmt.Errorf("no ConfigMap %q in the YAML", v.ConfigMap.Name))
			}
			data := map[string][]byte{}
			for k, val := range cm.Data {
				data[k] = []byte(val)
			}
			for k, val := range cm.BinaryData {
				data[k] = val
			}
			files, err := volumeItems(data, v.ConfigMap.Items)
			if err != nil {
				return nil, d.fail(field+".configMap.items", err)
			}
			src.named = cm.Name
			if !volumeFiles[cm.Name] {
				volumeFiles[cm.Name] = true
				out.volumes = append(out.volumes, volumePlan{name: cm.Name, labels: cm.Labels, opts: map[string]string{}, files: files})
			}
		case v.Secret != nil:
			data, ok := pl.secrets[v.Secret.SecretName]
			if !ok {
				if v.Secret.Optional != nil && *v.Secret.Optional {
					src.optional = true
					break
				}
				return nil, d.fail(field+".secret.secretName", fmt.Errorf("no Secret %q in the YAML", v.Secret.SecretName))
			}
			files, err := volumeItems(data, v.Secret.Items)
			if err != nil {
				return nil, d.fail(field+".secret.items", err)
			}
			src.named = v.Secret.SecretName
			if !volumeFiles[src.named] {
				volumeFiles[src.named] = true
				out.volumes = append(out.volumes, volumePlan{name: src.named, opts: map[string]string{}, files: files})
			}
		default:
			return nil, d.fail(field, errors.New("needs hostPath, emptyDir, persistentVolumeClaim, configMap or secret"))
		}
		mounts[v.Name] = src
	}
	return mounts, nil
}

// checkHostPath checks a hostPath volume's path against its type.
func checkHostPath(path string, typ v1.HostPathType) error {
	fi, err := os.Stat(path)
	switch typ {
	case v1.HostPathUnset, v1.HostPathDirectoryOrCreate:
		if err == nil && typ == v1.HostPathDirectoryOrCreate && !fi.IsDir() {
			return fmt.Errorf("%q is not a directory", path)
		}
		return nil
	case v1.HostPathFileOrCreate:
		if err == nil && fi.IsDir() {
			return fmt.Errorf("%q is a directory", path)
		}
		if err != nil {
			return fmt.Errorf("type FileOrCreate: %q does not exist (only DirectoryOrCreate creates)", path)
		}
		return nil
	case v1.HostPathDirectory:
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("%q is not an existing directory", path)
		}
	case v1.HostPathFile:
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%q is not an existing file", path)
		}
	case v1.HostPathSocket:
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%q is not an existing socket", path)
		}
	case v1.HostPathCharDev:
		if err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice == 0 {
			return fmt.Errorf("%q is not an existing character device", path)
		}
	case v1.HostPathBlockDev:
		if err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fmt.Errorf("%q is not an existing block device", path)
		}
	default:
		return fmt.Errorf("type %q is not supported (\"\", Directory, DirectoryOrCreate, File, FileOrCreate, Socket, CharDevice, BlockDevice)", typ)
	}
	return nil
}

// volumeItems maps the keys of a ConfigMap or Secret to file names.
func volumeItems(data map[string][]byte, items []v1.KeyToPath) (map[string][]byte, error) {
	files := map[string][]byte{}
	if len(items) == 0 {
		for k, v := range data {
			if !validFileName(k) {
				return nil, fmt.Errorf("key %q is not a file name", k)
			}
			files[k] = v
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("no key %q", it.Key)
		}
		if !validFileName(it.Path) {
			return nil, fmt.Errorf("path %q is not a file name", it.Path)
		}
		files[it.Path] = v
	}
	return files, nil
}

func validFileName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\x00")
}

var (
	labelRef      = regexp.MustCompile(`^metadata\.labels\['(.+)'\]$`)
	annotationRef = regexp.MustCompile(`^metadata\.annotations\['(.+)'\]$`)
)

func (pl *planner) container(ctx context.Context, d *document, t podTemplate, field string, c v1.Container,
	names map[string]bool, mounts map[string]mountSource, annotations, labels map[string]string) (core.ContainerSpec, error) {
	var cs core.ContainerSpec
	if c.Name == "" || !validName(c.Name) {
		return cs, d.fail(field+".name", fmt.Errorf("%q is not a container name", c.Name))
	}
	if names[c.Name] {
		return cs, d.fail(field+".name", fmt.Errorf("%q is used twice in the pod", c.Name))
	}
	names[c.Name] = true
	image, err := pl.image(ctx, d, field, c)
	if err != nil {
		return cs, err
	}
	cs = core.ContainerSpec{
		Name:         t.name + "-" + c.Name,
		Image:        image,
		RawImageName: c.Image,
		Terminal:     c.TTY,
		Stdin:        c.Stdin,
		WorkDir:      c.WorkingDir,
		Annotations:  copyMap(annotations),
		Labels:       copyMap(labels),
	}
	if len(c.Command) > 0 {
		cs.Entrypoint = c.Command
	}
	if len(c.Args) > 0 {
		cs.Command = c.Args
	}
	if gp := t.spec.TerminationGracePeriodSeconds; gp != nil {
		if *gp < 0 {
			return cs, d.fail(t.path+".terminationGracePeriodSeconds", errors.New("is negative"))
		}
		timeout := uint(*gp)
		cs.StopTimeout = &timeout
	}
	env := map[string]string{}
	for i, ef := range c.EnvFrom {
		if err := pl.envFrom(env, ef); err != nil {
			return cs, d.fail(fmt.Sprintf("%s.envFrom[%d]", field, i), err)
		}
	}
	for i, e := range c.Env {
		val, set, err := pl.envValue(e, t.name, labels, annotations)
		if err != nil {
			return cs, d.fail(fmt.Sprintf("%s.env[%d]", field, i), err)
		}
		if set {
			env[e.Name] = val
		}
	}
	if len(env) > 0 {
		cs.Env = env
	}
	if err := resources(&cs, c.Resources); err != nil {
		return cs, d.fail(field+".resources", err)
	}
	securityContext(&cs, c.SecurityContext, t.spec.SecurityContext)
	if err := probes(&cs, c, d, field); err != nil {
		return cs, err
	}
	for i, vm := range c.VolumeMounts {
		src, ok := mounts[vm.Name]
		mfield := fmt.Sprintf("%s.volumeMounts[%d]", field, i)
		if !ok {
			return cs, d.fail(mfield+".name", fmt.Errorf("no volume %q in the pod", vm.Name))
		}
		if !filepath.IsAbs(vm.MountPath) || strings.ContainsAny(vm.MountPath, ":\x00") {
			return cs, d.fail(mfield+".mountPath", fmt.Errorf("%q is not an absolute path", vm.MountPath))
		}
		ro := vm.ReadOnly || src.readOnly
		switch {
		case src.optional:
		case src.device != "":
			// A read-only device may be read, not written nor created.
			perms := "rwm"
			if ro {
				perms = "r"
			}
			cs.Devices = append(cs.Devices, specs.LinuxDevice{Path: src.device + ":" + vm.MountPath + ":" + perms})
		case src.hostPath != "":
			opts := []string{"rbind"}
			if ro {
				opts = append(opts, "ro")
			}
			cs.Mounts = append(cs.Mounts, mountSpec(vm.MountPath, "bind", src.hostPath, opts))
		case src.tmpfs != "":
			opts := strings.Split(src.tmpfs, ",")
			if ro {
				opts[0] = "ro"
			}
			cs.Mounts = append(cs.Mounts, mountSpec(vm.MountPath, "tmpfs", "tmpfs", opts))
		case src.named != "":
			nv := core.NamedVolume{Name: src.named, Dest: vm.MountPath}
			if ro {
				nv.Options = []string{"ro"}
			}
			cs.Volumes = append(cs.Volumes, nv)
		default:
			cs.Volumes = append(cs.Volumes, core.NamedVolume{Dest: vm.MountPath, IsAnonymous: true})
		}
	}
	if err := cs.Validate(); err != nil {
		return cs, d.fail(field, err)
	}
	return cs, nil
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (pl *planner) envFrom(env map[string]string, ef v1.EnvFromSource) error {
	switch {
	case ef.ConfigMapRef != nil:
		cm, ok := pl.configMaps[ef.ConfigMapRef.Name]
		if !ok {
			if ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
				return nil
			}
			return fmt.Errorf("no ConfigMap %q in the YAML", ef.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env[ef.Prefix+k] = v
		}
	case ef.SecretRef != nil:
		data, ok := pl.secrets[ef.SecretRef.Name]
		if !ok {
			if ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
				return nil
			}
			return fmt.Errorf("no Secret %q in the YAML", ef.SecretRef.Name)
		}
		for k, v := range data {
			env[ef.Prefix+k] = string(v)
		}
	default:
		return errors.New("needs configMapRef or secretRef")
	}
	return nil
}

func (pl *planner) envValue(e v1.EnvVar, podName string, labels, annotations map[string]string) (string, bool, error) {
	if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") {
		return "", false, fmt.Errorf("%q is not a variable name", e.Name)
	}
	vf := e.ValueFrom
	if vf == nil {
		return e.Value, true, nil
	}
	switch {
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, ok := pl.configMaps[ref.Name]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("no ConfigMap %q in the YAML", ref.Name)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("ConfigMap %q has no key %q", ref.Name, ref.Key)
		}
		return v, true, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		data, ok := pl.secrets[ref.Name]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("no Secret %q in the YAML", ref.Name)
		}
		v, ok := data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("Secret %q has no key %q", ref.Name, ref.Key)
		}
		return string(v), true, nil
	case vf.FieldRef != nil:
		path := vf.FieldRef.FieldPath
		if path == "metadata.name" {
			return podName, true, nil
		}
		if m := labelRef.FindStringSubmatch(path); m != nil {
			return labels[m[1]], true, nil
		}
		if m := annotationRef.FindStringSubmatch(path); m != nil {
			return annotations[m[1]], true, nil
		}
		return "", false, fmt.Errorf("fieldPath %q is not supported (metadata.name, metadata.labels['x'], metadata.annotations['x'])", path)
	}
	return "", false, errors.New("valueFrom needs configMapKeyRef, secretKeyRef or fieldRef")
}

// resources maps limits (and the memory request) to cgroup limits.
func resources(cs *core.ContainerSpec, r v1.ResourceRequirements) error {
	for name := range r.Limits {
		if name != v1.ResourceCPU && name != v1.ResourceMemory {
			return fmt.Errorf("limit %q is not supported (cpu, memory)", name)
		}
	}
	for name := range r.Requests {
		if name != v1.ResourceCPU && name != v1.ResourceMemory {
			return fmt.Errorf("request %q is not supported (cpu, memory)", name)
		}
	}
	res := &specsResources{}
	if q, ok := r.Limits[v1.ResourceCPU]; ok {
		milli := q.MilliValue()
		if milli <= 0 {
			return errors.New("limits.cpu must be positive")
		}
		period := uint64(100000)
		quota := milli * 100
		if quota < 1000 {
			quota = 1000
		}
		res.cpuPeriod, res.cpuQuota = &period, &quota
	}
	mem := func(q resource.Quantity, what string) (*int64, error) {
		v, ok := q.AsInt64()
		if !ok || v <= 0 {
			return nil, fmt.Errorf("%s %q is not a positive byte count", what, q.String())
		}
		return &v, nil
	}
	if q, ok := r.Limits[v1.ResourceMemory]; ok {
		v, err := mem(q, "limits.memory")
		if err != nil {
			return err
		}
		res.memLimit = v
	}
	if q, ok := r.Requests[v1.ResourceMemory]; ok {
		v, err := mem(q, "requests.memory")
		if err != nil {
			return err
		}
		res.memReservation = v
	}
	cs.Resources = res.spec()
	return nil
}

func securityContext(cs *core.ContainerSpec, sc *v1.SecurityContext, psc *v1.PodSecurityContext) {
	if sc == nil {
		sc = &v1.SecurityContext{}
	}
	if psc == nil {
		psc = &v1.PodSecurityContext{}
	}
	if sc.ReadOnlyRootFilesystem != nil {
		cs.ReadOnly = *sc.ReadOnlyRootFilesystem
	}
	if sc.Privileged != nil {
		cs.Privileged = *sc.Privileged
	}
	if sc.AllowPrivilegeEscalation != nil {
		cs.NoNewPrivs = !*sc.AllowPrivilegeEscalation
	}
	if caps := sc.Capabilities; caps != nil {
		for _, c := range caps.Add {
			cs.CapAdd = append(cs.CapAdd, string(c))
		}
		for _, c := range caps.Drop {
			cs.CapDrop = append(cs.CapDrop, string(c))
		}
	}
	user := sc.RunAsUser
	if user == nil {
		user = psc.RunAsUser
	}
	if user != nil {
		cs.User = strconv.FormatInt(*user, 10)
	}
	group := sc.RunAsGroup
	if group == nil {
		group = psc.RunAsGroup
	}
	if group != nil {
		if cs.User == "" {
			cs.User = "0"
		}
		cs.User += ":" + strconv.FormatInt(*group, 10)
	}
	for _, g := range psc.SupplementalGroups {
		cs.Groups = append(cs.Groups, strconv.FormatInt(g, 10))
	}
}

// probes maps a container's probes to its healthchecks. livenessProbe
// and readinessProbe are the healthcheck (the container's health status;
// the caller adds the restart on failure of a liveness probe, as Podman
// does); a container has one healthcheck, which the livenessProbe takes
// when both are there (the caller reports the readinessProbe as not
// applied, in the pod's Logs).
// startupProbe is the startup healthcheck, which runs from each start
// until it passes; without another probe the healthcheck is "exit 0" on
// the startup probe's timings, as Podman 5 makes it.
func probes(cs *core.ContainerSpec, c v1.Container, d *document, field string) error {
	probe, probeField := c.LivenessProbe, ".livenessProbe"
	if probe == nil {
		probe, probeField = c.ReadinessProbe, ".readinessProbe"
	}
	if probe != nil {
		hc, err := healthcheck(probe, c.Ports)
		if err != nil {
			return d.fail(field+probeField, err)
		}
		cs.HealthConfig = hc
	}
	if sp := c.StartupProbe; sp != nil {
		hc, err := healthcheck(sp, c.Ports)
		if err != nil {
			return d.fail(field+".startupProbe", err)
		}
		if sp.SuccessThreshold < 0 {
			return d.fail(field+".startupProbe.successThreshold", errors.New("is negative"))
		}
		cs.StartupHealthConfig = &core.StartupHealthConfig{HealthConfig: *hc, Successes: int(sp.SuccessThreshold)}
		if cs.HealthConfig == nil {
			cs.HealthConfig = probeTimes(&core.HealthConfig{Test: []string{"CMD-SHELL", "exit 0"}}, sp)
		}
	}
	return nil
}

// healthcheck turns a probe into the container's healthcheck.
func healthcheck(p *v1.Probe, ports []v1.ContainerPort) (*core.HealthConfig, error) {
	var cmd string
	h := p.ProbeHandler
	switch {
	case h.Exec != nil:
		if len(h.Exec.Command) == 0 {
			return nil, errors.New("exec.command is empty")
		}
		test := append([]string{"CMD"}, h.Exec.Command...)
		return probeTimes(&core.HealthConfig{Test: test}, p), nil
	case h.HTTPGet != nil:
		port, err := portNumber(h.HTTPGet.Port, ports)
		if err != nil {
			return nil, fmt.Errorf("httpGet.port: %w", err)
		}
		scheme := strings.ToLower(string(h.HTTPGet.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		host := h.HTTPGet.Host
		if host == "" {
			host = "localhost"
		}
		path := h.HTTPGet.Path
		if path == "" {
			path = "/"
		}
		url := fmt.Sprintf("%s://%s:%d%s", scheme, host, port, path)
		cmd = fmt.Sprintf("curl -f %s || wget -q -O /dev/null %s || exit 1", shellQuote(url), shellQuote(url))
	case h.TCPSocket != nil:
		port, err := portNumber(h.TCPSocket.Port, ports)
		if err != nil {
			return nil, fmt.Errorf("tcpSocket.port: %w", err)
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = "localhost"
		}
		cmd = fmt.Sprintf("nc -z %s %d || exit 1", shellQuote(host), port)
	default:
		return nil, errors.New("needs exec, httpGet or tcpSocket")
	}
	return probeTimes(&core.HealthConfig{Test: []string{"CMD-SHELL", cmd}}, p), nil
}

func probeTimes(hc *core.HealthConfig, p *v1.Probe) *core.HealthConfig {
	sec := func(v, def int32) time.Duration {
		if v < 1 {
			v = def
		}
		return time.Duration(v) * time.Second
	}
	hc.Interval = sec(p.PeriodSeconds, 10)
	hc.Timeout = sec(p.TimeoutSeconds, 1)
	hc.Retries = int(p.FailureThreshold)
	if hc.Retries < 1 {
		hc.Retries = 3
	}
	if p.InitialDelaySeconds > 0 {
		hc.StartPeriod = time.Duration(p.InitialDelaySeconds) * time.Second
	}
	return hc
}

func portNumber(port intstr.IntOrString, ports []v1.ContainerPort) (int, error) {
	if port.Type == intstr.String {
		for _, p := range ports {
			if p.Name == port.StrVal {
				return int(p.ContainerPort), nil
			}
		}
		n, err := strconv.Atoi(port.StrVal)
		if err != nil {
			return 0, fmt.Errorf("no container port named %q", port.StrVal)
		}
		port = intstr.FromInt32(int32(n))
	}
	if port.IntVal < 1 || port.IntVal > 65535 {
		return 0, fmt.Errorf("%d is not a port", port.IntVal)
	}
	return int(port.IntVal), nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// service publishes a Service's node ports (and, with publishAllPorts,
// its ports) on the pods its selector matches.
func (pl *planner) service(d *document, pods []*podPlan) error {
	spec := d.Service.Spec
	switch spec.Type {
	case "", v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort:
	default:
		return d.fail("spec.type", fmt.Errorf("%q is not ClusterIP or NodePort", spec.Type))
	}
	var matched []*podPlan
	for _, pp := range pods {
		if len(spec.Selector) > 0 && selects(spec.Selector, pp.spec.Labels) {
			matched = append(matched, pp)
		}
	}
	for i, port := range spec.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto := strings.ToLower(string(port.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		if proto != "tcp" && proto != "udp" && proto != "sctp" {
			return d.fail(field+".protocol", fmt.Errorf("%q is not TCP, UDP or SCTP", port.Protocol))
		}
		if port.Port < 1 || port.Port > 65535 {
			return d.fail(field+".port", fmt.Errorf("%d is not a port", port.Port))
		}
		if port.NodePort != 0 && spec.Type != v1.ServiceTypeNodePort {
			return d.fail(field+".nodePort", errors.New("is for type NodePort"))
		}
		if port.NodePort < 0 || port.NodePort > 65535 {
			return d.fail(field+".nodePort", fmt.Errorf("%d is not a port", port.NodePort))
		}
		host := uint16(port.NodePort)
		if host == 0 && pl.opts.PublishAllPorts {
			host = uint16(port.Port)
		}
		if host == 0 {
			continue
		}
		target := int(port.Port)
		if port.TargetPort.Type == intstr.String || port.TargetPort.IntVal != 0 {
			n, err := targetPort(port.TargetPort, matched)
			if err != nil {
				return d.fail(field+".targetPort", err)
			}
			target = n
		}
		if len(matched) > 1 {
			return d.fail(field+".nodePort", fmt.Errorf("host port %d would be published by %d pods", host, len(matched)))
		}
		for _, pp := range matched {
			if pp.spec.NetNS.NSMode == core.NetNSHost {
				return d.fail(field, fmt.Errorf("pod %s uses the host's network", pp.name))
			}
			pp.spec.PortMappings = append(pp.spec.PortMappings, core.PortMapping{ContainerPort: uint16(target), HostPort: host, Protocol: proto})
		}
	}
	return nil
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func targetPort(tp intstr.IntOrString, pods []*podPlan) (int, error) {
	if tp.Type == intstr.Int {
		if tp.IntVal < 1 || tp.IntVal > 65535 {
			return 0, fmt.Errorf("%d is not a port", tp.IntVal)
		}
		return int(tp.IntVal), nil
	}
	for _, pp := range pods {
		for _, c := range pp.doc.podSpec().Containers {
			for _, p := range c.Ports {
				if p.Name == tp.StrVal {
					return int(p.ContainerPort), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no container port named %q in the selected pods", tp.StrVal)
}

// podSpec is the pod spec of a pod-making document.
func (d *document) podSpec() v1.PodSpec {
	switch d.Kind {
	case kindPod:
		return d.Pod.Spec
	case kindDeployment:
		return d.Deployment.Spec.Template.Spec
	case kindDaemonSet:
		return d.DaemonSet.Spec.Template.Spec
	case kindJob:
		return d.Job.Spec.Template.Spec
	}
	return v1.PodSpec{}
}

// podNames lists the pods the documents make, in order.
func podNames(docs []*document) []string {
	var names []string
	for _, d := range docs {
		switch d.Kind {
		case kindPod:
			names = append(names, d.Name)
		case kindDeployment:
			replicas := 1
			if r := d.Deployment.Spec.Replicas; r != nil {
				replicas = int(*r)
			}
			for i := 0; i < replicas && i <= 100; i++ {
				names = append(names, DeploymentPodName(d.Name, i))
			}
		case kindDaemonSet, kindJob:
			names = append(names, d.Name+"-pod")
		}
	}
	return names
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
