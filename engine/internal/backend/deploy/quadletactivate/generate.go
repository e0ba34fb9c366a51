package quadletactivate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/core"
)

// ServiceUnitName is the service Podman's generator makes of quadlet file
// (web.service for web.container and web.kube, db-pod.service,
// data-volume.service, net-network.service, app-image.service,
// app-build.service, or its ServiceName=).
func ServiceUnitName(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return quadlets.ServiceName(filepath.Base(file), "")
	}
	u := parseUnit(filepath.Base(file), file, data)
	return quadlets.ServiceName(u.name, u.value("ServiceName"))
}

// serviceOf is the service of installed quadlet name.
func serviceOf(store UnitStore, name string) string {
	file, err := store.UnitFile(name)
	if err != nil {
		return quadlets.ServiceName(name, "")
	}
	return ServiceUnitName(file)
}

// notRemote are the keys of a quadlet section that activation honours but
// podman 4.3.1's remote client, which the generated services run, cannot
// express, with the reason; a unit with one is refused (400) rather than
// generated without it.
var notRemote = map[string]map[string]string{
	"Network": {
		"InterfaceName": "its network create has no --interface-name",
		"DNS":           "its network create has no --dns",
	},
	"Kube": {"PublishPort": "its kube play has no --publish"},
}

// serviceType is the Type= of each kind's generated service.
var serviceType = map[string]string{
	"Container": "simple", "Pod": "simple", "Kube": "oneshot",
	"Network": "oneshot", "Volume": "oneshot", "Image": "oneshot", "Build": "oneshot",
}

// unitDependencyKeys are the [Unit] keys whose quadlet unit names
// (After=db.network) Podman's generator turns into service names.
var unitDependencyKeys = set("After", "Before", "BindsTo", "Conflicts", "OnFailure", "OnSuccess", "PartOf",
	"PropagatesReloadTo", "PropagatesStopTo", "ReloadPropagatedFrom", "Requires", "Requisite",
	"StopPropagatedFrom", "Upholds", "Wants")

// GenerateService translates installed quadlet name (its file, the other
// installed units resolved through store) into the systemd service
// Podman 5's generator would write: the unit's [Unit], [Service],
// [Install] and X- sections, its quadlet section kept as [X-KIND] and
// [Quadlet] as [X-Quadlet], Requires=/After= (BindsTo=/After= for a pod)
// on the services of the units it references, quadlet names in [Unit]
// dependencies turned into their services, and the podman commands that
// make its object. The commands drive the engine through podman's remote
// client (--url engineURL), as podman 4.3.1 can: see docs/engine/quadlets.md for
// what each kind becomes. A key those commands cannot express is refused
// with file, line and key (core.ErrInvalidArgument).
func GenerateService(store UnitStore, name, engineURL string) (string, error) {
	u, err := readUnit(store, name)
	if err != nil {
		return "", err
	}
	file, err := store.UnitFile(name)
	if err != nil {
		return "", err
	}
	if err := checkGenerated(u); err != nil {
		return "", err
	}
	p, err := translate(u, storeResolver{store: store})
	if err != nil {
		return "", err
	}
	s := &service{u: u, store: store, podman: []string{podmanBinary}}
	if engineURL != "" {
		s.podman = append(s.podman, "--url", engineURL)
	}
	s.unitLines = append(s.unitLines, "SourcePath="+file)
	if es := u.allIn("Quadlet", "DefaultDependencies"); len(es) == 0 || boolValue(es[len(es)-1].Value) {
		s.unitLines = append(s.unitLines, "Wants=network-online.target", "After=network-online.target")
	}
	s.depend(p.refs)
	switch u.kind {
	case "Container":
		s.container(p)
	case "Pod":
		err = s.pod(p)
	case "Kube":
		s.kube(p)
	case "Network":
		s.network(p)
	case "Volume":
		s.volume(p)
	case "Image":
		s.image(p)
	case "Build":
		s.build(p)
	default:
		return "", core.InvalidArgument("quadlet", fmt.Errorf("%s: no service is generated for this kind", name))
	}
	if err != nil {
		return "", err
	}
	return s.render()
}

// storeResolver names referenced units from the installed ones.
type storeResolver struct{ store UnitStore }

func (s storeResolver) object(u *unit, e quadlets.Entry, ref string) (string, error) {
	ru, err := readUnit(s.store, ref)
	if err != nil {
		return "", u.errAt(e, fmt.Errorf("references %s, which is not installed", ref))
	}
	return objectName(ru), nil
}

// checkGenerated refuses what the generated service cannot carry: keys of
// the quadlet's section that activation does not honour or that podman
// 4.3.1's remote client cannot express, and [Service] keys the generator
// sets itself. [Unit], [Install] and X- sections are systemd's and pass.
func checkGenerated(u *unit) error {
	for _, e := range u.entries {
		switch {
		case strings.HasPrefix(e.Section, "X-"), e.Section == "Unit", e.Section == "Install":
		case e.Section == "Quadlet":
			if !activatedKeys["Quadlet"][e.Key] {
				return u.errAt(e, errors.New("not supported in a generated service"))
			}
		case e.Section == "Service":
			if err := checkServiceKey(u, e); err != nil {
				return u.errAt(e, err)
			}
		case e.Section == u.kind:
			if why, ok := notRemote[u.kind][e.Key]; ok {
				return u.errAt(e, fmt.Errorf("cannot be expressed with podman 4.3.1's remote client, which the generated service runs: %s", why))
			}
			if e.Key == "Mount" && slices.ContainsFunc(strings.Split(e.Value, ","), func(f string) bool { return strings.HasPrefix(strings.TrimSpace(f), "subpath=") }) {
				return u.errAt(e, errors.New("cannot be expressed with podman 4.3.1's remote client, which the generated service runs: its --mount has no subpath (Podman 5 added it)"))
			}
			if !activatedKeys[u.kind][e.Key] {
				return u.errAt(e, fmt.Errorf("not supported in a generated service (supported in a %s unit: see docs/engine/quadlets.md)", filepath.Ext(u.name)))
			}
		default:
			return u.errAt(e, fmt.Errorf("section [%s] is not supported in a generated service", e.Section))
		}
	}
	switch u.kind {
	case "Container":
		if es := u.all("Notify"); len(es) > 0 && boolValue(es[len(es)-1].Value) {
			return u.errAt(es[len(es)-1], errors.New("podman's remote client cannot pass the container's sd_notify through the engine (only false)"))
		}
	case "Kube":
		if es := u.all("KubeDownForce"); len(es) > 0 && boolValue(es[len(es)-1].Value) {
			return u.errAt(es[len(es)-1], errors.New("cannot be expressed with podman 4.3.1's remote client, which the generated service runs: its kube down has no --force (only false)"))
		}
	case "Image":
		if es := u.all("Policy"); len(es) > 0 {
			e := es[len(es)-1]
			pol, err := core.ParsePullPolicy(e.Value)
			switch {
			case err != nil:
				return u.errAt(e, err)
			case pol == core.PullNewer:
				return u.errAt(e, errors.New("Policy=newer cannot be expressed with podman 4.3.1's remote client, which the generated service runs: its pull has no --policy (always, missing or never)"))
			case pol != core.PullAlways && u.boolean("AllTags"):
				return u.errAt(e, fmt.Errorf("Policy=%s cannot be checked for every tag of AllTags (only always)", e.Value))
			}
		}
	}
	return nil
}

// checkServiceKey refuses a [Service] key of the unit that the generated
// service sets itself.
func checkServiceKey(u *unit, e quadlets.Entry) error {
	switch e.Key {
	case "ExecStart", "PIDFile", "NotifyAccess":
		return fmt.Errorf("set by the generated service")
	case "Type":
		if want := serviceType[u.kind]; e.Value != want {
			return fmt.Errorf("the generated service of a %s unit is Type=%s", filepath.Ext(u.name), want)
		}
	case "Restart":
		if v := strings.TrimSpace(e.Value); serviceType[u.kind] == "oneshot" && (v == "always" || v == "on-success") {
			return fmt.Errorf("Restart=%s: systemd does not allow it for a Type=oneshot service, which the generated service of a %s unit is", v, filepath.Ext(u.name))
		}
	case "KillMode":
		if (u.kind == "Container" || u.kind == "Kube") && e.Value != "mixed" && e.Value != "control-group" {
			return fmt.Errorf("KillMode=%s: the generated service allows mixed or control-group only, as Podman's", e.Value)
		}
	}
	return nil
}

func boolValue(v string) bool {
	b, _ := quadlets.ParseBool(v)
	return b
}

// service is a generated service being written.
type service struct {
	u     *unit
	store UnitStore
	// podman is the podman binary with its global flags (--url).
	podman []string
	// unitLines and serviceLines are the generated lines of [Unit] and
	// [Service], before the unit's own.
	unitLines, serviceLines []string
}

// cmd is a podman command line.
func (s *service) cmd(args ...string) []string {
	return append(slices.Clone(s.podman), args...)
}

// exec adds an Exec*= line; prefix "-" ignores its failure.
func (s *service) exec(key, prefix string, words []string) {
	s.serviceLines = append(s.serviceLines, key+"="+prefix+commandLine(words))
}

// set adds a [Service] line unless the unit sets the key itself.
func (s *service) set(key, value string) {
	if len(s.u.allIn("Service", key)) == 0 {
		s.serviceLines = append(s.serviceLines, key+"="+value)
	}
}

// oneshot makes a service that runs its commands once and, with
// remain, stays active after (Podman's .volume, .network and .image;
// .build does not remain).
func (s *service) oneshot(remain bool) {
	s.set("Type", "oneshot")
	if remain {
		s.set("RemainAfterExit", "yes")
	}
	s.set("SyslogIdentifier", "%N")
}

// depend makes the service require (bind to, for a pod) and start after
// the services of the units it references.
func (s *service) depend(refs []string) {
	seen := map[string]bool{}
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		svc := serviceOf(s.store, ref)
		if filepath.Ext(ref) == ".pod" {
			s.unitLines = append(s.unitLines, "BindsTo="+svc, "After="+svc)
		} else {
			s.unitLines = append(s.unitLines, "Requires="+svc, "After="+svc)
		}
	}
}

// ifMissing is a shell command line that runs create unless exists
// succeeds: podman 4.3.1's remote client has no --ignore for volume and
// network create, nor --policy for pull.
func ifMissing(exists, create []string) []string {
	return []string{"/bin/sh", "-c", shellLine(exists) + " || exec " + shellLine(create)}
}

// shellLine quotes words for sh.
func shellLine(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
			out[i] = w
			continue
		}
		out[i] = "'" + strings.ReplaceAll(w, "'", `'"'"'`) + "'"
	}
	return strings.Join(out, " ")
}

func (s *service) container(p *plan) {
	c := p.container
	run := s.cmd("run", "--name", c.Name, "--replace", "--rm", "--pull", string(p.pullPolicy))
	run = append(run, runFlags(c)...)
	run = append(run, c.Image)
	run = append(run, c.Command...)
	stop := s.cmd("rm", "-v", "-f", "-i", c.Name)
	s.serviceLines = append(s.serviceLines, "Environment=PODMAN_SYSTEMD_UNIT=%n")
	s.set("KillMode", "mixed")
	s.set("Type", "simple")
	s.set("SyslogIdentifier", "%N")
	s.exec("ExecStart", "", run)
	s.exec("ExecStop", "", stop)
	s.exec("ExecStopPost", "-", stop)
}

// pod creates and starts the pod before the service's main process,
// which waits on the pod's infra container: the service is active while
// the pod runs and ends when it stops (Podman's service forks and follows
// the infra container's conmon through --infra-conmon-pidfile, a file on
// the engine's side that the remote client cannot ask for). Its member
// containers' services are wanted after it.
func (s *service) pod(p *plan) error {
	spec := p.pod
	members, err := s.podMembers()
	if err != nil {
		return err
	}
	for _, m := range members {
		s.unitLines = append(s.unitLines, "Wants="+m, "Before="+m)
	}
	create := s.cmd("pod", "create", "--replace", "--exit-policy", "stop")
	for _, pm := range spec.PortMappings {
		create = append(create, "--publish", formatPort(pm))
	}
	create = append(create, flagPairs("--label", spec.Labels)...)
	create = append(create, networkFlags(spec.NetNS, spec.Networks)...)
	for _, f := range []struct {
		flag   string
		values []string
	}{{"--dns", spec.DNSServers}, {"--dns-search", spec.DNSSearch}, {"--dns-option", spec.DNSOptions}, {"--add-host", spec.HostAdd}} {
		for _, v := range f.values {
			create = append(create, f.flag, v)
		}
	}
	if spec.Hostname != "" {
		create = append(create, "--hostname", spec.Hostname)
	}
	if spec.ShmSize != nil {
		create = append(create, "--shm-size", strconv.FormatInt(*spec.ShmSize, 10))
	}
	create = append(create, userNSFlags(spec.UserNS, spec.IDMappings)...)
	infra := spec.Name + "-infra"
	create = append(create, "--infra-name", infra, "--name", spec.Name)
	s.serviceLines = append(s.serviceLines, "Environment=PODMAN_SYSTEMD_UNIT=%n")
	s.set("Type", "simple")
	s.set("Restart", "on-failure")
	s.set("SyslogIdentifier", "%N")
	s.exec("ExecStartPre", "", create)
	s.exec("ExecStartPre", "", s.cmd("pod", "start", spec.Name))
	s.exec("ExecStart", "", s.cmd("wait", infra))
	s.exec("ExecStop", "-", s.cmd("pod", "stop", "--time=10", spec.Name))
	s.exec("ExecStopPost", "-", s.cmd("pod", "rm", "--force", spec.Name))
	return nil
}

// podMembers are the services of the installed .container units whose
// Pod= names this pod.
func (s *service) podMembers() ([]string, error) {
	list, err := s.store.ListStatus(nil, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, q := range list {
		if filepath.Ext(q.Name) != ".container" {
			continue
		}
		cu, err := readUnit(s.store, q.Name)
		if err != nil {
			return nil, err
		}
		if cu.value("Pod") == s.u.name {
			out = append(out, serviceOf(s.store, q.Name))
		}
	}
	return out, nil
}

// networkFlags are --network flags for a namespace mode and networks.
func networkFlags(ns core.Namespace, nets map[string]core.PerNetworkOptions) []string {
	var out []string
	switch ns.NSMode {
	case core.NetNSNone, core.NetNSHost, core.NetNSPrivate:
		out = append(out, "--network", ns.NSMode)
	}
	names := make([]string, 0, len(nets))
	for n := range nets {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, "--network", n)
	}
	return out
}

// kube plays the YAML once and takes it down when the service stops
// (Podman's service is Type=notify, told by a service container that
// podman 4.3.1's remote client cannot create).
func (s *service) kube(p *plan) {
	k := p.kube
	play := s.cmd("kube", "play", "--replace")
	for _, n := range k.opts.Networks {
		play = append(play, "--network", n)
	}
	play = append(play, k.yamlFile)
	s.serviceLines = append(s.serviceLines, "Environment=PODMAN_SYSTEMD_UNIT=%n")
	s.set("KillMode", "mixed")
	s.oneshot(true)
	s.exec("ExecStart", "", play)
	s.exec("ExecStopPost", "", s.cmd("kube", "down", k.yamlFile))
}

func (s *service) network(p *plan) {
	n := p.network
	create := s.cmd("network", "create")
	if n.Driver != "" {
		create = append(create, "--driver", n.Driver)
	}
	if n.Internal {
		create = append(create, "--internal")
	}
	if n.IPv6Enabled {
		create = append(create, "--ipv6")
	}
	if !n.DNSEnabled {
		create = append(create, "--disable-dns")
	}
	for _, sub := range n.Subnets {
		create = append(create, "--subnet", sub.Subnet.String())
		if sub.Gateway != nil {
			create = append(create, "--gateway", sub.Gateway.String())
		}
	}
	s.createIfMissing("network", n.Name, create, n.Options, n.Labels)
}

func (s *service) volume(p *plan) {
	v := p.volume
	create := s.cmd("volume", "create")
	if v.Driver != "" {
		create = append(create, "--driver", v.Driver)
	}
	s.createIfMissing("volume", v.Name, create, v.Options, v.Labels)
}

// createIfMissing ends a network's or volume's service: create, with the
// object's options and labels and then its name, runs once, where
// "podman KIND exists NAME" finds none.
func (s *service) createIfMissing(kind, name string, create []string, options, labels map[string]string) {
	create = append(create, flagPairs("--opt", options)...)
	create = append(create, flagPairs("--label", labels)...)
	create = append(create, name)
	s.oneshot(true)
	s.exec("ExecStart", "", ifMissing(s.cmd(kind, "exists", name), create))
}

// image pulls as Podman's service does (always, unless Policy= says
// missing or never), then names the image ImageTag as activation does.
func (s *service) image(p *plan) {
	img := p.image
	pull := s.cmd("image", "pull")
	if img.pull.AllTags {
		pull = append(pull, "--all-tags")
	}
	for _, f := range [][2]string{{"--arch", img.pull.Arch}, {"--os", img.pull.OS}, {"--variant", img.pull.Variant}} {
		if f[1] != "" {
			pull = append(pull, f[0], f[1])
		}
	}
	if img.pull.TLSVerify != nil {
		pull = append(pull, fmt.Sprintf("--tls-verify=%t", *img.pull.TLSVerify))
	}
	pull = append(pull, img.pull.Reference)
	exists := s.cmd("image", "exists", img.pull.Reference)
	s.oneshot(true)
	policy := core.PullAlways
	if v, ok := s.u.last("Policy"); ok {
		policy, _ = core.ParsePullPolicy(v)
	}
	switch policy {
	case core.PullMissing:
		s.exec("ExecStart", "", ifMissing(exists, pull))
	case core.PullNever:
		s.exec("ExecStart", "", exists)
	default:
		s.exec("ExecStart", "", pull)
	}
	if img.tag != "" && img.tag != img.pull.Reference {
		s.exec("ExecStartPost", "", s.cmd("tag", img.pull.Reference, img.tag))
	}
}

// build builds the context directory with its tag; like Podman's, the
// service does not remain active.
func (s *service) build(p *plan) {
	b := p.build
	cmd := s.cmd("build")
	if _, ok := s.u.last("Pull"); ok {
		cmd = append(cmd, "--pull="+string(b.opts.PullPolicy))
	}
	for _, f := range [][2]string{{"--arch", s.u.value("Arch")}, {"--target", b.opts.Target}} {
		if f[1] != "" {
			cmd = append(cmd, f[0], f[1])
		}
	}
	for _, t := range b.opts.Tags {
		cmd = append(cmd, "--tag", t)
	}
	for _, l := range b.opts.Labels {
		cmd = append(cmd, "--label", l)
	}
	for _, a := range b.opts.Annotations {
		cmd = append(cmd, "--annotation", a)
	}
	cmd = append(cmd, flagPairs("--build-arg", b.opts.BuildArgs)...)
	for _, f := range b.opts.Containerfiles {
		cmd = append(cmd, "--file", filepath.Join(b.dir, f))
	}
	cmd = append(cmd, b.dir)
	s.oneshot(false)
	s.exec("ExecStart", "", cmd)
}

// render writes the service: [Unit] with the generated lines and the
// unit's own (quadlet names in dependencies turned into services), the
// unit's other sections in its order (the quadlet's own as [X-KIND],
// [Quadlet] as [X-Quadlet]), [Service] and [Install].
func (s *service) render() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by berth-engine from %s, as Podman's quadlet generator would\n#\n", s.u.name)
	unitLines := slices.Clone(s.unitLines)
	for _, e := range s.u.entries {
		if e.Section != "Unit" {
			continue
		}
		v, err := s.unitDependency(e)
		if err != nil {
			return "", err
		}
		unitLines = append(unitLines, e.Key+"="+v)
	}
	writeLines(&b, "Unit", unitLines)
	var order []string
	for _, e := range s.u.entries {
		if !slices.Contains(order, e.Section) {
			order = append(order, e.Section)
		}
	}
	for _, sec := range order {
		switch sec {
		case "Unit", "Service", "Install":
			continue
		case s.u.kind, "Quadlet":
			writeLines(&b, "X-"+sec, s.sectionLines(sec))
		default:
			writeLines(&b, sec, s.sectionLines(sec))
		}
	}
	writeLines(&b, "Service", append(slices.Clone(s.serviceLines), s.sectionLines("Service")...))
	writeLines(&b, "Install", s.sectionLines("Install"))
	return b.String(), nil
}

// unitDependency is the value of a [Unit] entry with the quadlet units a
// dependency key names turned into their services, as Podman's generator
// does (After=db.network: After=db-network.service).
func (s *service) unitDependency(e quadlets.Entry) (string, error) {
	if !unitDependencyKeys[e.Key] {
		return e.Value, nil
	}
	words := strings.Fields(e.Value)
	for i, w := range words {
		if !quadlets.IsQuadletFile(w) {
			continue
		}
		if _, err := s.store.UnitFile(w); err != nil {
			return "", s.u.errAt(e, fmt.Errorf("names %s, which is not installed", w))
		}
		words[i] = serviceOf(s.store, w)
	}
	return strings.Join(words, " "), nil
}

// sectionLines are the unit's entries of section, as written.
func (s *service) sectionLines(section string) []string {
	var out []string
	for _, e := range s.u.entries {
		if e.Section == section {
			out = append(out, e.Key+"="+e.Value)
		}
	}
	return out
}

func writeLines(b *strings.Builder, section string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "\n[%s]\n", section)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}
