package quadletactivate

import (
	"encoding/json"
	"errors"
	"fmt"
	units "github.com/docker/go-units"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/core"
)

// resolver names the engine object a reference to another quadlet unit
// (Network=db.network, Image=app.image ...) stands for, and reads the
// files a unit names.
type resolver interface {
	object(u *unit, e quadlets.Entry, ref string) (string, error)
}

// plan is what activating one unit does; exactly one of the object
// fields is set, after the kind.
type plan struct {
	// refs are the quadlets the unit references, in the unit's order.
	refs []string
	// timeout bounds the activation ([Service] TimeoutStartSec; 0: none).
	timeout time.Duration

	container  *core.ContainerSpec
	pullPolicy core.PullPolicy
	network    *core.Network
	volume     *core.VolumeCreateOptions
	pod        *core.PodSpec
	image      *imagePlan
	build      *buildPlan
	kube       *kubePlan
}

// kubePlan plays yamlFile with opts; its teardown is kube down, forced
// with downForce (KubeDownForce=).
type kubePlan struct {
	yamlFile  string
	opts      core.KubePlayOptions
	downForce bool
}

// imagePlan pulls Pull.Reference and names the result Tag ("" for none).
type imagePlan struct {
	pull core.PullOptions
	tag  string
}

// buildPlan builds the context directory dir.
type buildPlan struct {
	dir  string
	opts core.BuildOptions
}

// objectName is the engine name of the object unit u creates, as Podman's
// generator names it: the unit's naming key, else systemd-BASE.
func objectName(u *unit) string {
	key := map[string]string{"Container": "ContainerName", "Network": "NetworkName", "Volume": "VolumeName", "Pod": "PodName", "Image": "ImageTag", "Build": "ImageTag"}[u.kind]
	if v, ok := u.last(key); ok && v != "" {
		return v
	}
	if u.kind == "Image" {
		return u.value("Image")
	}
	return "systemd-" + u.base()
}

// translate turns a unit into its plan, naming every bad value with its line.
func translate(u *unit, r resolver) (*plan, error) {
	p := &plan{}
	if e := u.allIn("Service", "TimeoutStartSec"); len(e) > 0 {
		d, err := parseSeconds(e[len(e)-1].Value)
		if err != nil {
			return nil, u.errAt(e[len(e)-1], err)
		}
		p.timeout = d
	}
	ref := func(e quadlets.Entry, v string, exts ...string) (string, bool, error) {
		ext := filepath.Ext(v)
		for _, want := range exts {
			if ext == want {
				if v != filepath.Base(v) {
					return "", false, u.errAt(e, fmt.Errorf("%q: a quadlet reference is a unit file name", v))
				}
				p.refs = append(p.refs, v)
				name, err := r.object(u, e, v)
				return name, true, err
			}
		}
		return v, false, nil
	}
	var err error
	switch u.kind {
	case "Container":
		err = translateContainer(u, p, ref)
	case "Network":
		err = translateNetwork(u, p)
	case "Volume":
		err = translateVolume(u, p)
	case "Image":
		err = translateImage(u, p)
	case "Pod":
		err = translatePod(u, p, ref)
	case "Build":
		err = translateBuild(u, p)
	case "Kube":
		err = translateKube(u, p, ref)
	default:
		err = fmt.Errorf("quadlet %s: unknown kind", u.name)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

type refFunc func(e quadlets.Entry, v string, exts ...string) (string, bool, error)

func translateContainer(u *unit, p *plan, ref refFunc) error {
	spec := &core.ContainerSpec{Name: objectName(u)}
	p.container = spec
	p.pullPolicy = core.PullMissing
	if es := u.all("Image"); len(es) > 0 {
		e := es[len(es)-1]
		name, _, err := ref(e, e.Value, ".image", ".build")
		if err != nil {
			return err
		}
		spec.Image = name
	}
	if es := u.all("Pull"); len(es) > 0 {
		pol, err := core.ParsePullPolicy(es[len(es)-1].Value)
		if err != nil {
			return u.errAt(es[len(es)-1], err)
		}
		p.pullPolicy = pol
	}
	var err error
	if spec.Command, err = u.words("Exec"); err != nil {
		return err
	}
	if v, ok := u.last("Entrypoint"); ok {
		if strings.HasPrefix(v, "[") {
			if err := json.Unmarshal([]byte(v), &spec.Entrypoint); err != nil {
				return u.errAt(u.all("Entrypoint")[0], fmt.Errorf("not a JSON array of strings: %w", err))
			}
		} else {
			spec.Entrypoint = []string{v}
		}
	}
	if spec.Env, err = containerEnv(u); err != nil {
		return err
	}
	if spec.Labels, err = u.assignments("Label"); err != nil {
		return err
	}
	if spec.Annotations, err = u.assignments("Annotation"); err != nil {
		return err
	}
	if spec.Sysctl, err = u.assignments("Sysctl"); err != nil {
		return err
	}
	for _, field := range []struct {
		key string
		dst *[]string
	}{
		{"AddCapability", &spec.CapAdd}, {"DropCapability", &spec.CapDrop}, {"DNS", &spec.DNSServers},
		{"DNSSearch", &spec.DNSSearch}, {"DNSOption", &spec.DNSOptions}, {"AddHost", &spec.HostAdd},
	} {
		if *field.dst, err = u.words(field.key); err != nil {
			return err
		}
	}
	spec.Hostname = u.value("HostName")
	spec.WorkDir = u.value("WorkingDir")
	spec.Timezone = u.value("Timezone")
	spec.ReadOnly = u.boolean("ReadOnly")
	spec.NoNewPrivs = u.boolean("NoNewPrivileges")
	spec.Init = u.boolean("RunInit")
	if user, ok := u.last("User"); ok {
		spec.User = user
	}
	if group, ok := u.last("Group"); ok {
		if spec.User == "" {
			return u.errAt(u.all("Group")[0], errors.New("Group needs User"))
		}
		spec.User += ":" + group
	}
	if v, ok := u.last("StopTimeout"); ok {
		n, _ := strconv.ParseUint(v, 10, 32)
		t := uint(n)
		spec.StopTimeout = &t
	}
	if es := u.allIn("Service", "Restart"); len(es) > 0 {
		e := es[len(es)-1]
		policy, err := quadlets.RestartPolicy(u.kind, e.Value)
		if err != nil {
			return u.errAt(e, err)
		}
		spec.RestartPolicy = policy
	}
	if es := u.all("Pod"); len(es) > 0 {
		e := es[len(es)-1]
		name, _, err := ref(e, e.Value, ".pod")
		if err != nil {
			return err
		}
		spec.Pod = name
	}
	if err := containerHealth(u, spec); err != nil {
		return err
	}
	if err := publishAndJoin(u, ref, &spec.PortMappings, &spec.NetNS, &spec.Networks); err != nil {
		return err
	}
	if aliases, err := u.words("NetworkAlias"); err != nil {
		return err
	} else if len(aliases) > 0 {
		if len(spec.Networks) == 0 {
			return u.errAt(u.all("NetworkAlias")[0], errors.New("NetworkAlias needs a Network= naming the network"))
		}
		for name, opts := range spec.Networks {
			opts.Aliases = aliases
			spec.Networks[name] = opts
		}
	}
	for _, e := range u.all("Volume") {
		if err := containerVolume(u, e, ref, spec); err != nil {
			return err
		}
	}
	for _, e := range u.all("Tmpfs") {
		dest, opts, _ := strings.Cut(e.Value, ":")
		if !filepath.IsAbs(dest) {
			return u.errAt(e, fmt.Errorf("%q is not an absolute path", dest))
		}
		m := specs.Mount{Type: "tmpfs", Source: "tmpfs", Destination: dest}
		if opts != "" {
			m.Options = strings.Split(opts, ",")
		}
		spec.Mounts = append(spec.Mounts, m)
	}
	for _, e := range u.all("Secret") {
		if err := containerSecret(u, e, spec); err != nil {
			return err
		}
	}
	return containerLimits(u, ref, spec)
}

// containerEnv reads EnvironmentFile= (in order), then Environment=, as
// Podman's --env-file then --env.
func containerEnv(u *unit) (map[string]string, error) {
	env := map[string]string{}
	for _, e := range u.all("EnvironmentFile") {
		if u.dry {
			continue
		}
		data, err := os.ReadFile(u.hostPath(e.Value))
		if err != nil {
			return nil, u.errAt(e, fmt.Errorf("reading the environment file: %w", err))
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				v, ok = os.LookupEnv(k)
				if !ok {
					continue
				}
			}
			env[k] = v
		}
	}
	more, err := u.assignments("Environment")
	if err != nil {
		return nil, err
	}
	for k, v := range more {
		env[k] = v
	}
	if len(env) == 0 {
		return nil, nil
	}
	return env, nil
}

// containerHealth reads the healthcheck keys.
func containerHealth(u *unit, spec *core.ContainerSpec) error {
	cmd, hasCmd := u.last("HealthCmd")
	var hc core.HealthConfig
	switch {
	case hasCmd && strings.EqualFold(cmd, "none"):
		hc.Test = []string{"NONE"}
	case hasCmd:
		hc.Test = []string{"CMD-SHELL", cmd}
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"HealthInterval", &hc.Interval}, {"HealthTimeout", &hc.Timeout}, {"HealthStartPeriod", &hc.StartPeriod}} {
		es := u.all(d.key)
		if len(es) == 0 {
			continue
		}
		e := es[len(es)-1]
		if !hasCmd {
			return u.errAt(e, errors.New("needs HealthCmd"))
		}
		v, err := time.ParseDuration(e.Value)
		if err != nil || v < 0 {
			return u.errAt(e, fmt.Errorf("%q is not a duration (30s, 1m)", e.Value))
		}
		*d.dst = v
	}
	if es := u.all("HealthRetries"); len(es) > 0 {
		if !hasCmd {
			return u.errAt(es[0], errors.New("needs HealthCmd"))
		}
		hc.Retries, _ = strconv.Atoi(es[len(es)-1].Value)
	}
	if hasCmd {
		spec.HealthConfig = &hc
	}
	return nil
}

// publishAndJoin reads the PublishPort= entries into ports and joins the
// networks (joinNetworks), as a .container and a .pod do alike.
func publishAndJoin(u *unit, ref refFunc, ports *[]core.PortMapping, ns *core.Namespace, nets *map[string]core.PerNetworkOptions) error {
	for _, e := range u.all("PublishPort") {
		pm, err := parsePort(e.Value)
		if err != nil {
			return u.errAt(e, err)
		}
		*ports = append(*ports, pm)
	}
	return joinNetworks(u, ref, ns, nets)
}

// joinNetworks reads Network= values into a namespace mode and networks.
func joinNetworks(u *unit, ref refFunc, ns *core.Namespace, nets *map[string]core.PerNetworkOptions) error {
	es := u.all("Network")
	for _, e := range es {
		name, opts, _ := strings.Cut(e.Value, ":")
		if opts != "" {
			return u.errAt(e, fmt.Errorf("network options (%q) are not supported by activation", opts))
		}
		switch name {
		case core.NetNSNone, core.NetNSHost, core.NetNSPrivate:
			if len(es) > 1 {
				return u.errAt(e, fmt.Errorf("Network=%s cannot be combined with other networks", name))
			}
			ns.NSMode = name
			continue
		case "":
			return u.errAt(e, errors.New("empty network name"))
		}
		if quadlets.IsQuadletFile(name) && filepath.Ext(name) != ".network" {
			return u.errAt(e, fmt.Errorf("%q: joining another unit's network namespace is not supported (a .network unit or a network name)", name))
		}
		ns.NSMode = core.NetNSBridge
		if name == core.NetNSBridge {
			continue
		}
		resolved, _, err := ref(e, name, ".network")
		if err != nil {
			return err
		}
		if *nets == nil {
			*nets = map[string]core.PerNetworkOptions{}
		}
		(*nets)[resolved] = core.PerNetworkOptions{}
	}
	return nil
}

// containerVolume reads one Volume=[[SOURCE:]DEST[:OPTIONS]]: a .volume
// unit or a volume name, a host path (relative to the unit), or none (an
// anonymous volume).
func containerVolume(u *unit, e quadlets.Entry, ref refFunc, spec *core.ContainerSpec) error {
	parts := strings.Split(e.Value, ":")
	var src, dest, opts string
	switch len(parts) {
	case 1:
		dest = parts[0]
	case 2:
		src, dest = parts[0], parts[1]
	case 3:
		src, dest, opts = parts[0], parts[1], parts[2]
	default:
		return u.errAt(e, fmt.Errorf("%q is not [SOURCE:]DESTINATION[:OPTIONS]", e.Value))
	}
	if !filepath.IsAbs(dest) {
		return u.errAt(e, fmt.Errorf("destination %q is not an absolute path", dest))
	}
	var options []string
	if opts != "" {
		options = strings.Split(opts, ",")
	}
	switch {
	case src == "":
		spec.Volumes = append(spec.Volumes, core.NamedVolume{Dest: dest, Options: options, IsAnonymous: true})
	case strings.HasPrefix(src, "/") || strings.HasPrefix(src, "."):
		mountOpts := append([]string{"rbind"}, options...)
		spec.Mounts = append(spec.Mounts, specs.Mount{Type: "bind", Source: u.hostPath(src), Destination: dest, Options: mountOpts})
	default:
		name, _, err := ref(e, src, ".volume")
		if err != nil {
			return err
		}
		spec.Volumes = append(spec.Volumes, core.NamedVolume{Name: name, Dest: dest, Options: options})
	}
	return nil
}

// containerSecret reads one Secret=NAME[,type=mount|env][,target=T][,uid=N][,gid=N][,mode=N].
func containerSecret(u *unit, e quadlets.Entry, spec *core.ContainerSpec) error {
	fields := strings.Split(e.Value, ",")
	name := fields[0]
	if name == "" {
		return u.errAt(e, errors.New("no secret name"))
	}
	kind, target := "mount", ""
	mount := core.SecretMount{Source: name}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return u.errAt(e, fmt.Errorf("%q is not OPTION=VALUE", f))
		}
		switch k {
		case "type":
			if v != "mount" && v != "env" {
				return u.errAt(e, fmt.Errorf("type=%s: want mount or env", v))
			}
			kind = v
		case "target":
			target = v
		case "uid", "gid", "mode":
			base := 10
			if k == "mode" {
				base = 8
			}
			n, err := strconv.ParseUint(v, base, 32)
			if err != nil {
				return u.errAt(e, fmt.Errorf("%s=%s is not a number", k, v))
			}
			switch k {
			case "uid":
				mount.UID = uint32(n)
			case "gid":
				mount.GID = uint32(n)
			default:
				mount.Mode = uint32(n)
			}
		default:
			return u.errAt(e, fmt.Errorf("unknown secret option %q", k))
		}
	}
	if kind == "env" {
		if mount.UID != 0 || mount.GID != 0 || mount.Mode != 0 {
			return u.errAt(e, errors.New("uid, gid and mode apply to type=mount only"))
		}
		if target == "" {
			target = name
		}
		if spec.SecretEnv == nil {
			spec.SecretEnv = map[string]string{}
		}
		spec.SecretEnv[target] = name
		return nil
	}
	mount.Target = target
	spec.Secrets = append(spec.Secrets, mount)
	return nil
}

// parsePort reads a published port (core.ParsePortMapping).
func parsePort(v string) (core.PortMapping, error) { return core.ParsePortMapping(v) }

func translateNetwork(u *unit, p *plan) error {
	n := &core.Network{Name: objectName(u), Driver: u.value("Driver"), NetworkInterface: u.value("InterfaceName")}
	n.IPv6Enabled = u.boolean("IPv6")
	n.Internal = u.boolean("Internal")
	n.DNSEnabled = !u.boolean("DisableDNS")
	var err error
	if n.Labels, err = u.assignments("Label"); err != nil {
		return err
	}
	if n.Options, err = u.assignments("Options"); err != nil {
		return err
	}
	if n.NetworkDNSServers, err = u.words("DNS"); err != nil {
		return err
	}
	gateways := u.all("Gateway")
	subnets := u.all("Subnet")
	if len(gateways) > len(subnets) {
		return u.errAt(gateways[len(subnets)], errors.New("a Gateway needs a Subnet"))
	}
	for i, e := range subnets {
		ipnet, err := core.ParseIPNet(e.Value)
		if err != nil {
			return u.errAt(e, fmt.Errorf("%q is not a subnet (CIDR)", e.Value))
		}
		s := core.Subnet{Subnet: ipnet}
		if i < len(gateways) {
			gw := net.ParseIP(gateways[i].Value)
			if gw == nil {
				return u.errAt(gateways[i], fmt.Errorf("%q is not an IP address", gateways[i].Value))
			}
			s.Gateway = gw
		}
		n.Subnets = append(n.Subnets, s)
	}
	p.network = n
	return nil
}

func translateVolume(u *unit, p *plan) error {
	v := &core.VolumeCreateOptions{Name: objectName(u), Driver: u.value("Driver")}
	if v.Driver == "image" {
		return u.errAt(u.all("Driver")[0], errors.New("image volumes are not supported by activation"))
	}
	var err error
	if v.Labels, err = u.assignments("Label"); err != nil {
		return err
	}
	for key, opt := range map[string]string{"Type": "type", "Device": "device", "Options": "o"} {
		if val, ok := u.last(key); ok {
			if v.Options == nil {
				v.Options = map[string]string{}
			}
			v.Options[opt] = val
		}
	}
	p.volume = v
	return nil
}

func translateImage(u *unit, p *plan) error {
	img := &imagePlan{pull: core.PullOptions{Reference: u.value("Image"), Policy: core.PullMissing}, tag: u.value("ImageTag")}
	if es := u.all("Policy"); len(es) > 0 {
		pol, err := core.ParsePullPolicy(es[len(es)-1].Value)
		if err != nil {
			return u.errAt(es[len(es)-1], err)
		}
		img.pull.Policy = pol
	}
	img.pull.AllTags = u.boolean("AllTags")
	if img.pull.AllTags && img.tag != "" {
		return u.errAt(u.all("ImageTag")[0], errors.New("ImageTag cannot name every tag of AllTags"))
	}
	img.pull.OS, img.pull.Arch, img.pull.Variant = u.value("OS"), u.value("Arch"), u.value("Variant")
	if _, ok := u.last("TLSVerify"); ok {
		b := u.boolean("TLSVerify")
		img.pull.TLSVerify = &b
	}
	p.image = img
	return nil
}

func translatePod(u *unit, p *plan, ref refFunc) error {
	spec := &core.PodSpec{Name: objectName(u), Hostname: u.value("HostName")}
	var err error
	if spec.Labels, err = u.assignments("Label"); err != nil {
		return err
	}
	for _, field := range []struct {
		key string
		dst *[]string
	}{{"DNS", &spec.DNSServers}, {"DNSSearch", &spec.DNSSearch}, {"DNSOption", &spec.DNSOptions}, {"AddHost", &spec.HostAdd}} {
		if *field.dst, err = u.words(field.key); err != nil {
			return err
		}
	}
	if err := publishAndJoin(u, ref, &spec.PortMappings, &spec.NetNS, &spec.Networks); err != nil {
		return err
	}
	if e, ok := lastEntry(u, "ShmSize"); ok {
		n, err := units.RAMInBytes(e.Value)
		if err != nil || n <= 0 {
			return u.errAt(e, fmt.Errorf("%q is not a size", e.Value))
		}
		spec.ShmSize = &n
	}
	if e, ok := lastEntry(u, "UserNS"); ok {
		// As a container's (containerUserNS): the pod's infra container
		// makes the user namespace its members join.
		var cs core.ContainerSpec
		if err := containerUserNS(e.Value, &cs); err != nil {
			return u.errAt(e, err)
		}
		spec.UserNS, spec.IDMappings = cs.UserNS, cs.IDMappings
	}
	p.pod = spec
	return nil
}

func translateBuild(u *unit, p *plan) error {
	b := &buildPlan{dir: u.dir}
	if v, ok := u.last("SetWorkingDirectory"); ok {
		switch v {
		case "unit":
		case "file":
			b.dir = filepath.Dir(u.hostPath(u.value("File")))
		default:
			b.dir = u.hostPath(v)
		}
	}
	b.opts.Tags = []string{u.value("ImageTag")}
	b.opts.Layers = true
	b.opts.Format = "oci"
	b.opts.PullPolicy = core.PullMissing
	if file, ok := u.last("File"); ok {
		rel, err := filepath.Rel(b.dir, u.hostPath(file))
		if err != nil || strings.HasPrefix(rel, "..") {
			return u.errAt(u.all("File")[0], fmt.Errorf("%q is outside the build context %s", file, b.dir))
		}
		b.opts.Containerfiles = []string{rel}
	}
	var err error
	if b.opts.BuildArgs, err = u.assignments("BuildArg"); err != nil {
		return err
	}
	if b.opts.Labels, err = u.words("Label"); err != nil {
		return err
	}
	if b.opts.Annotations, err = u.words("Annotation"); err != nil {
		return err
	}
	b.opts.Target = u.value("Target")
	if es := u.all("Arch"); len(es) > 0 {
		if arch := es[len(es)-1].Value; arch != runtime.GOARCH {
			return u.errAt(es[len(es)-1], fmt.Errorf("Arch=%s: the engine builds for its own architecture only (%s)", arch, runtime.GOARCH))
		}
	}
	if es := u.all("Pull"); len(es) > 0 {
		pol, err := core.ParsePullPolicy(es[len(es)-1].Value)
		if err != nil {
			return u.errAt(es[len(es)-1], err)
		}
		b.opts.PullPolicy = pol
	}
	p.build = b
	return nil
}

func translateKube(u *unit, p *plan, ref refFunc) error {
	k := &kubePlan{yamlFile: u.hostPath(u.value("Yaml")), downForce: u.boolean("KubeDownForce")}
	k.opts.ContextDir = filepath.Dir(k.yamlFile)
	for _, e := range u.all("PublishPort") {
		if _, err := parsePort(e.Value); err != nil {
			return u.errAt(e, err)
		}
		k.opts.PublishPorts = append(k.opts.PublishPorts, e.Value)
	}
	for _, e := range u.all("Network") {
		name, opts, _ := strings.Cut(e.Value, ":")
		if opts != "" || name == "" || (quadlets.IsQuadletFile(name) && filepath.Ext(name) != ".network") {
			return u.errAt(e, fmt.Errorf("%q: a network name or .network unit, without options", e.Value))
		}
		resolved, _, err := ref(e, name, ".network")
		if err != nil {
			return err
		}
		k.opts.Networks = append(k.opts.Networks, resolved)
	}
	p.kube = k
	return nil
}

// parseSeconds reads a systemd time span: seconds, or a number with a
// unit (ms, s, sec, min, h, hour ...); "infinity" is no bound.
func parseSeconds(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "infinity" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	r := strings.NewReplacer("hours", "h", "hour", "h", "minutes", "m", "minute", "m", "min", "m", "seconds", "s", "second", "s", "sec", "s", "msec", "ms", " ", "")
	d, err := time.ParseDuration(r.Replace(v))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a time span (90, 90s, 5min)", v)
	}
	return d, nil
}
