package quadletactivate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// podmanBinary is the podman the generated services run.
const podmanBinary = "/usr/bin/podman"

// runFlags are podman run's flags for a creation spec made by translate.
func runFlags(s *core.ContainerSpec) []string {
	var out []string
	add := func(flag string, values ...string) {
		for _, v := range values {
			out = append(out, flag, v)
		}
	}
	if len(s.Entrypoint) > 0 {
		ep, _ := json.Marshal(s.Entrypoint)
		add("--entrypoint", string(ep))
	}
	add("--env", sortedPairs(s.Env)...)
	add("--label", sortedPairs(s.Labels)...)
	add("--annotation", sortedPairs(s.Annotations)...)
	add("--sysctl", sortedPairs(s.Sysctl)...)
	for _, pm := range s.PortMappings {
		add("--publish", formatPort(pm))
	}
	switch s.NetNS.NSMode {
	case core.NetNSNone, core.NetNSHost, core.NetNSPrivate:
		add("--network", s.NetNS.NSMode)
	}
	var nets []string
	for n := range s.Networks {
		nets = append(nets, n)
	}
	sort.Strings(nets)
	for _, n := range nets {
		add("--network", n)
		add("--network-alias", s.Networks[n].Aliases...)
	}
	for _, v := range s.Volumes {
		spec := v.Dest
		if v.Name != "" {
			spec = v.Name + ":" + v.Dest
		}
		if len(v.Options) > 0 {
			spec += ":" + strings.Join(v.Options, ",")
		}
		add("--volume", spec)
	}
	for _, m := range s.Mounts {
		switch m.Type {
		case "tmpfs":
			add("--tmpfs", strings.TrimSuffix(m.Destination+":"+strings.Join(m.Options, ","), ":"))
		case "bind":
			spec := m.Source + ":" + m.Destination
			if opts := withoutRbind(m.Options); len(opts) > 0 {
				spec += ":" + strings.Join(opts, ",")
			}
			add("--volume", spec)
		}
	}
	for _, sec := range s.Secrets {
		v := sec.Source + ",type=mount"
		if sec.Target != "" {
			v += ",target=" + sec.Target
		}
		if sec.UID != 0 {
			v += ",uid=" + strconv.FormatUint(uint64(sec.UID), 10)
		}
		if sec.GID != 0 {
			v += ",gid=" + strconv.FormatUint(uint64(sec.GID), 10)
		}
		if sec.Mode != 0 {
			v += ",mode=" + strconv.FormatUint(uint64(sec.Mode), 8)
		}
		add("--secret", v)
	}
	for _, k := range sortedKeys(s.SecretEnv) {
		add("--secret", s.SecretEnv[k]+",type=env,target="+k)
	}
	if hc := s.HealthConfig; hc != nil {
		if len(hc.Test) == 2 {
			add("--health-cmd", hc.Test[1])
		} else {
			add("--health-cmd", "none")
		}
		if hc.Interval > 0 {
			add("--health-interval", hc.Interval.String())
		}
		if hc.Timeout > 0 {
			add("--health-timeout", hc.Timeout.String())
		}
		if hc.StartPeriod > 0 {
			add("--health-start-period", hc.StartPeriod.String())
		}
		if hc.Retries > 0 {
			add("--health-retries", strconv.Itoa(hc.Retries))
		}
	}
	if s.User != "" {
		add("--user", s.User)
	}
	if s.WorkDir != "" {
		add("--workdir", s.WorkDir)
	}
	if s.Hostname != "" {
		add("--hostname", s.Hostname)
	}
	if s.Timezone != "" {
		add("--tz", s.Timezone)
	}
	if s.ReadOnly {
		out = append(out, "--read-only")
	}
	if s.NoNewPrivs {
		add("--security-opt", "no-new-privileges")
	}
	if s.Init {
		out = append(out, "--init")
	}
	add("--cap-add", s.CapAdd...)
	add("--cap-drop", s.CapDrop...)
	add("--dns", s.DNSServers...)
	add("--dns-search", s.DNSSearch...)
	add("--dns-option", s.DNSOptions...)
	add("--add-host", s.HostAdd...)
	if s.StopTimeout != nil {
		add("--stop-timeout", strconv.FormatUint(uint64(*s.StopTimeout), 10))
	}
	if s.Pod != "" {
		add("--pod", s.Pod)
	}
	return append(out, limitFlags(s)...)
}

// limitFlags are the podman run flags of containerLimits' keys.
func limitFlags(s *core.ContainerSpec) []string {
	var out []string
	add := func(flag string, values ...string) {
		for _, v := range values {
			out = append(out, flag, v)
		}
	}
	if r := s.Resources; r != nil {
		if r.Memory != nil && r.Memory.Limit != nil {
			add("--memory", strconv.FormatInt(*r.Memory.Limit, 10))
		}
		if r.Pids != nil && r.Pids.Limit != nil {
			add("--pids-limit", strconv.FormatInt(*r.Pids.Limit, 10))
		}
	}
	if s.ShmSize != nil {
		add("--shm-size", strconv.FormatInt(*s.ShmSize, 10))
	}
	for _, rl := range s.Rlimits {
		add("--ulimit", fmt.Sprintf("%s=%s:%s", strings.ToLower(strings.TrimPrefix(rl.Type, "RLIMIT_")), ulimitWord(rl.Soft), ulimitWord(rl.Hard)))
	}
	if s.StopSignal != nil {
		add("--stop-signal", strconv.Itoa(*s.StopSignal))
	}
	if lc := s.LogConfiguration; lc != nil {
		if lc.Driver != "" {
			add("--log-driver", lc.Driver)
		}
		if lc.Tag != "" {
			add("--log-opt", "tag="+lc.Tag)
		}
		if lc.Size > 0 {
			add("--log-opt", "max-size="+strconv.FormatInt(lc.Size, 10))
		}
	}
	add("--group-add", s.Groups...)
	for _, d := range s.Devices {
		add("--device", d.Path)
	}
	for _, m := range s.Mask {
		add("--security-opt", "mask="+m)
	}
	for _, m := range s.Unmask {
		add("--security-opt", "unmask="+m)
	}
	out = append(out, userNSFlags(s.UserNS, s.IDMappings)...)
	for _, iv := range s.ImageVolumes {
		v := "type=image,source=" + iv.Source + ",destination=" + iv.Destination
		if iv.ReadWrite {
			v += ",rw=true"
		}
		add("--mount", v)
	}
	return out
}

// ulimitWord writes an rlimit value as --ulimit takes it (-1: unlimited).
func ulimitWord(v uint64) string {
	if v == ^uint64(0) {
		return "-1"
	}
	return strconv.FormatUint(v, 10)
}

func withoutRbind(opts []string) []string {
	var out []string
	for _, o := range opts {
		if o != "rbind" {
			out = append(out, o)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for _, k := range sortedKeys(m) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// flagPairs repeats flag before each key=value pair of m, sorted by key
// (--label, --opt, --build-arg ...).
func flagPairs(flag string, m map[string]string) []string {
	var out []string
	for _, kv := range sortedPairs(m) {
		out = append(out, flag, kv)
	}
	return out
}

// formatPort writes a port mapping as podman's --publish reads it.
func formatPort(pm core.PortMapping) string {
	span := func(start uint16) string {
		if pm.Range > 1 {
			return fmt.Sprintf("%d-%d", start, int(start)+int(pm.Range)-1)
		}
		return strconv.Itoa(int(start))
	}
	v := span(pm.ContainerPort) + "/" + pm.Protocol
	switch {
	case pm.HostIP != "":
		ip := pm.HostIP
		if strings.Contains(ip, ":") {
			ip = "[" + ip + "]"
		}
		host := ""
		if pm.HostPort != 0 {
			host = span(pm.HostPort)
		}
		v = ip + ":" + host + ":" + v
	case pm.HostPort != 0:
		v = span(pm.HostPort) + ":" + v
	}
	return v
}

// commandLine quotes words for an Exec*= line: systemd splits on
// whitespace and reads double quotes and backslashes; % and $ are
// specifiers and variables, doubled to stay literal.
func commandLine(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		w = strings.ReplaceAll(w, "%", "%%")
		w = strings.ReplaceAll(w, "$", "$$")
		if w == "" || strings.ContainsAny(w, " \t\n\"'\\;") {
			w = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(w) + `"`
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// userNSFlags is --userns for a container's or pod's user namespace mode
// (host, auto[:size=N]).
func userNSFlags(ns core.Namespace, m *core.IDMappingOptions) []string {
	switch ns.NSMode {
	case core.UserNSHost:
		return []string{"--userns", "host"}
	case core.UserNSAuto:
		v := "auto"
		if m != nil && m.AutoUserNsOpts.Size > 0 {
			v += ":size=" + strconv.FormatUint(uint64(m.AutoUserNsOpts.Size), 10)
		}
		return []string{"--userns", v}
	}
	return nil
}
