// Package top lists the processes of a container, read from its cgroup and
// /proc, with the descriptors Podman's top accepts (user, pid, ppid, pcpu,
// etime, tty, time, args, comm, ... and the capability, seccomp, label and
// group sets: every descriptor of Podman 4.3.1's top).
package top

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/rootfs"
)

// ErrUnknownDescriptor is wrapped for a descriptor top does not know.
var ErrUnknownDescriptor = errors.New("unknown top descriptor")

// DefaultDescriptors are used when the client names none (Podman's default).
var DefaultDescriptors = []string{"user", "pid", "ppid", "pcpu", "etime", "tty", "time", "args"}

// descriptor renders one column.
type descriptor struct {
	header string
	value  func(p *proc, ctx *renderCtx) string
}

// aliases maps AIX format codes to descriptor names, as ps and Podman accept.
var aliases = map[string]string{
	"%C": "pcpu", "%G": "group", "%P": "ppid", "%U": "user", "%a": "args", "%c": "comm",
	"%g": "rgroup", "%n": "nice", "%p": "pid", "%r": "pgid", "%t": "etime", "%u": "ruser",
	"%x": "time", "%y": "tty", "%z": "vsz",
}

var descriptors = map[string]descriptor{
	"args":   {"COMMAND", func(p *proc, _ *renderCtx) string { return p.args() }},
	"comm":   {"COMMAND", func(p *proc, _ *renderCtx) string { return p.comm }},
	"etime":  {"ELAPSED", func(p *proc, c *renderCtx) string { return c.elapsed(p).Round(time.Millisecond).String() }},
	"group":  {"GROUP", func(p *proc, c *renderCtx) string { return c.groupName(p.egid, c.groups) }},
	"hgroup": {"HGROUP", func(p *proc, c *renderCtx) string { return c.groupName(p.egid, c.hostGroups) }},
	"hpid":   {"HPID", func(p *proc, _ *renderCtx) string { return strconv.Itoa(p.hostPID) }},
	"huser":  {"HUSER", func(p *proc, c *renderCtx) string { return c.userName(p.euid, c.hostUsers) }},
	"nice":   {"NI", func(p *proc, _ *renderCtx) string { return strconv.Itoa(p.nice) }},
	"pcpu":   {"%CPU", func(p *proc, c *renderCtx) string { return c.pcpu(p) }},
	"pgid":   {"PGID", func(p *proc, c *renderCtx) string { return strconv.Itoa(c.nsPID(p.pgid)) }},
	"pid":    {"PID", func(p *proc, _ *renderCtx) string { return strconv.Itoa(p.nsPID) }},
	"ppid":   {"PPID", func(p *proc, c *renderCtx) string { return strconv.Itoa(c.nsPID(p.ppid)) }},
	"rgroup": {"RGROUP", func(p *proc, c *renderCtx) string { return c.groupName(p.rgid, c.groups) }},
	"ruser":  {"RUSER", func(p *proc, c *renderCtx) string { return c.userName(p.ruid, c.users) }},
	"rss":    {"RSS", func(p *proc, _ *renderCtx) string { return strconv.FormatUint(p.rssKiB, 10) }},
	"state":  {"STATE", func(p *proc, _ *renderCtx) string { return p.state }},
	"time":   {"TIME", func(p *proc, c *renderCtx) string { return c.cpuTime(p).Round(time.Millisecond).String() }},
	"tty":    {"TTY", func(p *proc, _ *renderCtx) string { return ttyName(p.ttyNr) }},
	"user":   {"USER", func(p *proc, c *renderCtx) string { return c.userName(p.euid, c.users) }},
	"vsz":    {"VSZ", func(p *proc, _ *renderCtx) string { return strconv.FormatUint(p.vszKiB, 10) }},
	"groups": {"GROUPS", func(p *proc, c *renderCtx) string {
		names := make([]string, len(p.groups))
		for i, g := range p.groups {
			names[i] = c.groupName(g, c.groups)
		}
		return strings.Join(names, ",")
	}},
	"hgroups": {"HGROUPS", func(p *proc, _ *renderCtx) string {
		ids := make([]string, len(p.groups))
		for i, g := range p.groups {
			ids[i] = strconv.Itoa(g)
		}
		return strings.Join(ids, ",")
	}},
	"capamb":  {"AMBIENT CAPS", func(p *proc, _ *renderCtx) string { return capSet(p.caps["CapAmb"]) }},
	"capinh":  {"INHERITED CAPS", func(p *proc, _ *renderCtx) string { return capSet(p.caps["CapInh"]) }},
	"capprm":  {"PERMITTED CAPS", func(p *proc, _ *renderCtx) string { return capSet(p.caps["CapPrm"]) }},
	"capeff":  {"EFFECTIVE CAPS", func(p *proc, _ *renderCtx) string { return capSet(p.caps["CapEff"]) }},
	"capbnd":  {"BOUNDING CAPS", func(p *proc, _ *renderCtx) string { return capSet(p.caps["CapBnd"]) }},
	"seccomp": {"SECCOMP", func(p *proc, _ *renderCtx) string { return seccompModes[p.seccomp] }},
	"label":   {"LABEL", func(p *proc, _ *renderCtx) string { return securityLabel(p.hostPID) }},
	"stime":   {"STIME", func(p *proc, c *renderCtx) string { return c.started(p).String() }},
}

// seccompModes renders the Seccomp field of /proc/PID/status as ps shows it.
var seccompModes = map[string]string{"0": "disabled", "1": "strict", "2": "filter", "": "?"}

// capSet renders a capability mask as Podman's top does: "full", "none",
// or the names without CAP_, sorted.
func capSet(mask uint64) string {
	switch mask {
	case 0:
		return "none"
	case oci.AllCapabilities:
		return "full"
	}
	names := oci.CapabilityNames(mask)
	for i, n := range names {
		names[i] = strings.TrimPrefix(n, "CAP_")
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// securityLabel is the process's LSM label, or "?" where there is none.
func securityLabel(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/attr/current", pid))
	if err != nil {
		return "?"
	}
	return strings.TrimRight(string(data), "\n\x00")
}

// ParseDescriptors splits the client's ps_args (comma or space separated)
// and checks every descriptor; none means DefaultDescriptors.
func ParseDescriptors(psArgs []string) ([]string, error) {
	var out []string
	for _, a := range psArgs {
		for _, d := range strings.FieldsFunc(a, func(r rune) bool { return r == ',' || r == ' ' }) {
			if alias, ok := aliases[d]; ok {
				d = alias
			}
			if _, ok := descriptors[d]; !ok {
				return nil, fmt.Errorf("%w: %q", ErrUnknownDescriptor, d)
			}
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		out = DefaultDescriptors
	}
	return out, nil
}

// Result is the process table in Podman's ContainerTopOKBody shape.
type Result struct {
	Titles    []string   `json:"Titles"`
	Processes [][]string `json:"Processes"`
}

// Options locate the container's processes.
type Options struct {
	// CgroupRoot is the cgroup mount ("" for the host's hierarchy).
	CgroupRoot string
	// CgroupPath is the container's cgroup relative to a controller root.
	CgroupPath string
	// Rootfs is the container's root filesystem, for its user names.
	Rootfs string
}

// List renders the container's processes with the given descriptors.
func List(opts Options, descs []string) (*Result, error) {
	pids, err := cgroups.At(opts.CgroupRoot).Procs(opts.CgroupPath)
	if err != nil {
		return nil, fmt.Errorf("read container processes: %w", err)
	}
	ctx := &renderCtx{
		now:        time.Now(),
		users:      rootfs.Names(opts.Rootfs, "etc/passwd"),
		groups:     rootfs.Names(opts.Rootfs, "etc/group"),
		hostUsers:  readIDNames("/etc/passwd"),
		hostGroups: readIDNames("/etc/group"),
		hostToNS:   map[int]int{},
		boot:       bootTime(),
	}
	if opts.Rootfs == "" {
		ctx.users, ctx.groups = ctx.hostUsers, ctx.hostGroups
	}
	var procs []*proc
	for _, pid := range pids {
		p, err := readProc(pid)
		if err != nil {
			continue // exited meanwhile
		}
		ctx.hostToNS[p.hostPID] = p.nsPID
		procs = append(procs, p)
	}
	sort.Slice(procs, func(i, j int) bool { return procs[i].nsPID < procs[j].nsPID })
	res := &Result{Processes: [][]string{}}
	for _, d := range descs {
		res.Titles = append(res.Titles, descriptors[d].header)
	}
	for _, p := range procs {
		row := make([]string, 0, len(descs))
		for _, d := range descs {
			row = append(row, descriptors[d].value(p, ctx))
		}
		res.Processes = append(res.Processes, row)
	}
	return res, nil
}

type proc struct {
	hostPID, nsPID int
	ppid, pgid     int
	comm, state    string
	cmdline        []string
	ttyNr          int
	utime, stime   uint64
	startTicks     uint64
	nice           int
	vszKiB, rssKiB uint64
	ruid, euid     int
	rgid, egid     int
	groups         []int
	// caps maps CapInh, CapPrm, CapEff, CapBnd and CapAmb to their masks.
	caps    map[string]uint64
	seccomp string
}

func (p *proc) args() string {
	if len(p.cmdline) == 0 {
		return "[" + p.comm + "]"
	}
	return strings.Join(p.cmdline, " ")
}

func readProc(pid int) (*proc, error) {
	dir := fmt.Sprintf("/proc/%d", pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return nil, err
	}
	// comm is in parentheses and may contain spaces or parentheses.
	open, closeIdx := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
	if open < 0 || closeIdx < open {
		return nil, fmt.Errorf("malformed %s/stat", dir)
	}
	p := &proc{hostPID: pid, nsPID: pid, comm: string(stat[open+1 : closeIdx]), caps: map[string]uint64{}}
	f := strings.Fields(string(stat[closeIdx+1:]))
	if len(f) < 22 {
		return nil, fmt.Errorf("short %s/stat", dir)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	atou := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
	p.state = f[0]
	p.ppid = atoi(f[1])
	p.pgid = atoi(f[2])
	p.ttyNr = atoi(f[4])
	p.utime, p.stime = atou(f[11]), atou(f[12])
	p.nice = atoi(f[16])
	p.startTicks = atou(f[19])
	p.vszKiB = atou(f[20]) / 1024
	p.rssKiB = atou(f[21]) * uint64(os.Getpagesize()) / 1024
	if cmd, err := os.ReadFile(dir + "/cmdline"); err == nil {
		for _, a := range strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00") {
			if a != "" {
				p.cmdline = append(p.cmdline, a)
			}
		}
	}
	if status, err := os.Open(dir + "/status"); err == nil {
		sc := bufio.NewScanner(status)
		for sc.Scan() {
			key, val, _ := strings.Cut(sc.Text(), ":")
			fields := strings.Fields(val)
			switch key {
			case "Uid":
				if len(fields) >= 2 {
					p.ruid, p.euid = atoi(fields[0]), atoi(fields[1])
				}
			case "Gid":
				if len(fields) >= 2 {
					p.rgid, p.egid = atoi(fields[0]), atoi(fields[1])
				}
			case "Groups":
				for _, g := range fields {
					p.groups = append(p.groups, atoi(g))
				}
			case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb":
				if len(fields) == 1 {
					mask, _ := strconv.ParseUint(fields[0], 16, 64)
					p.caps[key] = mask
				}
			case "Seccomp":
				if len(fields) == 1 {
					p.seccomp = fields[0]
				}
			case "NSpid":
				if len(fields) > 0 {
					p.nsPID = atoi(fields[len(fields)-1])
				}
			}
		}
		status.Close()
	}
	return p, nil
}

type renderCtx struct {
	now                   time.Time
	boot                  time.Time
	users, groups         map[int]string
	hostUsers, hostGroups map[int]string
	hostToNS              map[int]int
}

// nsPID maps a host PID to the container's namespace; a process outside
// the container (the parent of its init) is 0, as ps shows it.
func (c *renderCtx) nsPID(hostPID int) int {
	return c.hostToNS[hostPID]
}

func (c *renderCtx) elapsed(p *proc) time.Duration {
	started := c.boot.Add(time.Duration(p.startTicks) * time.Second / 100)
	if d := c.now.Sub(started); d > 0 {
		return d
	}
	return 0
}

// started is when the process started, to the second, in local time.
func (c *renderCtx) started(p *proc) time.Time {
	return time.Unix(c.boot.Unix()+int64(p.startTicks/100), 0)
}

func (c *renderCtx) cpuTime(p *proc) time.Duration {
	return time.Duration(p.utime+p.stime) * time.Second / 100
}

func (c *renderCtx) pcpu(p *proc) string {
	el := c.elapsed(p)
	if el <= 0 {
		return "0.000"
	}
	return strconv.FormatFloat(float64(c.cpuTime(p))/float64(el)*100, 'f', 3, 64)
}

func (c *renderCtx) userName(uid int, names map[int]string) string {
	if n, ok := names[uid]; ok {
		return n
	}
	return strconv.Itoa(uid)
}

func (c *renderCtx) groupName(gid int, names map[int]string) string {
	return c.userName(gid, names)
}

// readIDNames reads name:x:id lines of a passwd or group file.
func readIDNames(path string) map[int]string {
	out := map[int]string{}
	data, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		if id, err := strconv.Atoi(f[2]); err == nil {
			if _, dup := out[id]; !dup {
				out[id] = f[0]
			}
		}
	}
	return out
}

func bootTime() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Now()
	}
	return time.Now().Add(-time.Duration(ts.Nano()))
}

// ttyName renders a tty_nr as ps does: pts/N for pseudo-terminals, ? for none.
func ttyName(nr int) string {
	if nr == 0 {
		return "?"
	}
	major := (nr >> 8) & 0xfff
	minor := (nr & 0xff) | ((nr >> 12) & 0xfff00)
	switch {
	case major >= 136 && major <= 143:
		return "pts/" + strconv.Itoa(minor+(major-136)*256)
	case major == 4 && minor < 64:
		return "tty" + strconv.Itoa(minor)
	case major == 4:
		return "ttyS" + strconv.Itoa(minor-64)
	}
	return "?"
}
