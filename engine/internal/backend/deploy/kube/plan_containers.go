package kube

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-project/berth/engine/internal/core"
)

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
	name := t.name + "-" + c.Name
	if pl.opts.NoPodPrefix {
		name = c.Name
	}
	cs = core.ContainerSpec{
		Name:         name,
		Image:        image,
		RawImageName: c.Image,
		Terminal:     c.TTY,
		Stdin:        c.Stdin,
		WorkDir:      c.WorkingDir,
		Annotations:  copyMap(annotations),
		Labels:       copyMap(labels),
	}
	if err := pl.checkImage(ctx, &cs); err != nil {
		return cs, d.fail(field+".image", err)
	}
	// hostIPC and hostPID: each container joins the host's namespace (the
	// pod shares no IPC namespace of its own then; see pod).
	if t.spec.HostIPC {
		cs.IpcNS = core.Namespace{NSMode: core.NSHost}
	}
	if t.spec.HostPID {
		cs.PidNS = core.Namespace{NSMode: core.NSHost}
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
	if err := pl.cdiLimits(ctx, &cs, c.Resources); err != nil {
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
		if vm.SubPath != "" {
			if src.image == "" && src.named == "" && src.hostPath == "" {
				return cs, d.fail(mfield+".subPath", errors.New("is supported on persistentVolumeClaim, configMap, secret, hostPath and image volumes only"))
			}
			if _, err := core.CleanVolumeSubPath(vm.SubPath); err != nil {
				return cs, d.fail(mfield+".subPath", err)
			}
		}
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
			if vm.SubPath != "" {
				// Opened inside the host directory at each start, as a
				// volume's part is (Podman's subpath= mount option).
				opts = append(opts, "subpath="+vm.SubPath)
			}
			cs.Mounts = append(cs.Mounts, mountSpec(vm.MountPath, "bind", src.hostPath, opts))
		case src.tmpfs != "":
			opts := strings.Split(src.tmpfs, ",")
			if ro {
				opts[0] = "ro"
			}
			cs.Mounts = append(cs.Mounts, mountSpec(vm.MountPath, "tmpfs", "tmpfs", opts))
		case src.image != "":
			// Read-only whatever the mount says, as in Kubernetes.
			cs.ImageVolumes = append(cs.ImageVolumes, core.ImageVolume{Source: src.image, Destination: vm.MountPath, SubPath: vm.SubPath})
		case src.named != "":
			nv := core.NamedVolume{Name: src.named, Dest: vm.MountPath, SubPath: vm.SubPath}
			if ro {
				nv.Options = []string{"ro"}
			}
			cs.Volumes = append(cs.Volumes, nv)
		default:
			cs.Volumes = append(cs.Volumes, core.NamedVolume{Dest: vm.MountPath, IsAnonymous: true})
		}
	}
	if lc, _ := playLogConfig(&pl.opts); lc != nil {
		copied := *lc
		cs.LogConfiguration = &copied
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

// resources maps limits (and the memory request) to cgroup limits; limits
// of a CDI kind are cdiLimits'.
func resources(cs *core.ContainerSpec, r v1.ResourceRequirements) error {
	for name := range r.Limits {
		if name != v1.ResourceCPU && name != v1.ResourceMemory && !isCDIKind(name) {
			return fmt.Errorf("limit %q is not supported (cpu, memory, a CDI kind vendor.com/class)", name)
		}
	}
	for name := range r.Requests {
		if name != v1.ResourceCPU && name != v1.ResourceMemory && !isCDIKind(name) {
			return fmt.Errorf("request %q is not supported (cpu, memory, a CDI kind vendor.com/class)", name)
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
	// A profile of the runtime's default is the engine's default; a
	// Localhost one names a profile file (seccomp) or a loaded profile
	// (AppArmor), which create checks like --security-opt's.
	if p := sc.SeccompProfile; p != nil {
		switch p.Type {
		case v1.SeccompProfileTypeUnconfined:
			cs.SeccompProfilePath = "unconfined"
		case v1.SeccompProfileTypeLocalhost:
			if p.LocalhostProfile != nil {
				cs.SeccompProfilePath = *p.LocalhostProfile
			} else {
				cs.SeccompProfilePath = "Localhost"
			}
		}
	}
	if p := sc.AppArmorProfile; p != nil {
		switch p.Type {
		case v1.AppArmorProfileTypeUnconfined:
			cs.ApparmorProfile = "unconfined"
		case v1.AppArmorProfileTypeLocalhost:
			if p.LocalhostProfile != nil {
				cs.ApparmorProfile = *p.LocalhostProfile
			} else {
				cs.ApparmorProfile = "Localhost"
			}
		}
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

// checkImage looks the container's image up at plan time, so that a
// missing one is an error naming its field before anything is made. The
// image's labels the pod does not set reach the container through its
// create, which merges them as Podman's does.
func (pl *planner) checkImage(ctx context.Context, cs *core.ContainerSpec) error {
	_, err := pl.p.o.Images.Lookup(ctx, cs.Image)
	return err
}
