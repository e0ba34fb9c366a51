// Package stats reads container resource usage from the container's
// cgroup, on the v1 hierarchies or the unified v2 one (the cgroups seam
// tells which), and turns it into Podman's ContainerStats.
package stats

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
)

// DefaultRoot is where the host's cgroup hierarchies are mounted.
const DefaultRoot = cgroups.DefaultRoot

// clockTicks is USER_HZ, the unit of cpuacct.stat (100 on Linux).
const clockTicks = 100

// ErrNoCgroup is returned when the container's cgroup does not exist (it is
// not running).
var ErrNoCgroup = cgroups.ErrNoCgroup

// Sample is one reading of a cgroup's counters.
type Sample struct {
	// CPUNano is the total CPU time used, in nanoseconds.
	CPUNano uint64
	// CPUSystemNano is the part of CPUNano spent in the kernel.
	CPUSystemNano uint64
	PerCPU        []uint64
	MemUsage      uint64
	MemLimit      uint64
	PIDs          uint64
	MemMaxUsage   uint64
	BlockRead     uint64
	BlockWrite    uint64
	// Blkio holds the per-device byte counters behind BlockRead and BlockWrite.
	Blkio []BlkioEntry
	NetRx uint64
	NetTx uint64
	// Time is when the sample was taken.
	Time time.Time
}

// Reader reads cgroup counters below Root ("" for the host's hierarchy).
// With Handles, the v2 control files stay open between samples.
//
// Docker asks for Docker's memory figures: the usage from memory.current
// (less the inactive page cache) and the peak (max_usage). Without it the
// memory figures are Podman's: on cgroup v2 Podman 4 (containers/common)
// reports memory.stat's anon as the usage and has no peak, so neither
// memory.current nor memory.peak is read (two files less per container
// and request). On v1 both read memory.usage_in_bytes less the inactive
// page cache; only Docker reads the peak.
type Reader struct {
	Root    string
	Handles *Handles
	Docker  bool
}

// Read samples the cgroup at path (relative to the hierarchy's root, or
// each v1 controller's) and, when pid is positive, the network counters of
// that process's namespace.
func (r Reader) Read(cgroupPath string, pid int) (Sample, error) {
	h := cgroups.At(r.Root)
	var s Sample
	var err error
	if h.Unified() {
		dir := filepath.Join(h.Root(), cgroupPath)
		read := func(name string, _ []byte) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
		if r.Handles != nil {
			read = r.Handles.files(dir)
		}
		s, err = readUnified(dir, read, r.Docker)
	} else {
		s, err = readV1(h.Root(), cgroupPath, r.Docker)
	}
	if err != nil {
		return Sample{}, err
	}
	if pid > 0 && !sharesHostNetwork(pid) {
		s.NetRx, s.NetTx = readNetDev(fmt.Sprintf("/proc/%d/net/dev", pid))
	}
	return s, nil
}

// sampleBuffers hold a control file's contents while readUnified parses
// it: one buffer serves every file of a sample, and the buffers are
// reused across samples (a stats request over many containers otherwise
// allocates a page per file).
var sampleBuffers = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// readUnified reads the v2 control files of the cgroup at dir through read
// (a file's name to its contents, read into the buffer it is given where
// it can): cpu.stat (microseconds), the memory usage (docker: memory.current
// less inactive page cache, and memory.peak; else memory.stat's anon, as
// Podman) against memory.max, pids.current and io.stat. v2 keeps no per-CPU
// usage. Each file is parsed before the next is read, without building
// maps: this runs for every container of a stats request.
func readUnified(dir string, read func(name string, buf []byte) ([]byte, error), docker bool) (Sample, error) {
	bp := sampleBuffers.Get().(*[]byte)
	defer sampleBuffers.Put(bp)
	readFile := func(name string) ([]byte, error) {
		data, err := read(name, (*bp)[:cap(*bp)])
		if err == nil && cap(data) > cap(*bp) {
			*bp = data[:cap(data)]
		}
		return data, err
	}
	number := func(name string) (uint64, error) {
		data, err := readFile(name)
		if err != nil {
			return 0, err
		}
		return parseUint(name, data)
	}
	s := Sample{Time: time.Now()}
	cpu, err := readFile("cpu.stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Sample{}, fmt.Errorf("%w: %s", ErrNoCgroup, dir)
		}
		return Sample{}, err
	}
	usageUsec, _ := keyValue(cpu, "usage_usec")
	systemUsec, _ := keyValue(cpu, "system_usec")
	s.CPUNano, s.CPUSystemNano = usageUsec*1000, systemUsec*1000
	if docker {
		usage, err := number("memory.current")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Sample{}, err
		}
		if data, err := readFile("memory.stat"); err == nil {
			if inactive, _ := keyValue(data, "inactive_file"); inactive < usage {
				usage -= inactive
			}
		}
		s.MemUsage = usage
		if peak, err := number("memory.peak"); err == nil {
			s.MemMaxUsage = peak
		}
	} else if data, err := readFile("memory.stat"); err == nil {
		s.MemUsage, _ = keyValue(data, "anon")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Sample{}, err
	}
	s.MemLimit = physicalMemory()
	// memory.max reads "max" when unlimited (no error made for it: this
	// is most containers, at every request).
	if data, err := readFile("memory.max"); err == nil && string(bytes.TrimSpace(data)) != "max" {
		if limit, err := parseUint("memory.max", data); err == nil && limit > 0 && limit < s.MemLimit {
			s.MemLimit = limit
		}
	}
	if pids, err := number("pids.current"); err == nil {
		s.PIDs = pids
	}
	if data, err := readFile("io.stat"); err == nil {
		s.Blkio = parseIOStat(data)
	}
	for _, e := range s.Blkio {
		switch e.Op {
		case "Read":
			s.BlockRead += e.Value
		case "Write":
			s.BlockWrite += e.Value
		}
	}
	return s, nil
}

// keyValue finds the line "key N" of a flat-keyed control file (cpu.stat,
// memory.stat) and returns N.
func keyValue(data []byte, key string) (uint64, bool) {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		if len(line) > len(key) && line[len(key)] == ' ' && string(line[:len(key)]) == key {
			v, err := strconv.ParseUint(string(bytes.TrimSpace(line[len(key)+1:])), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// parseIOStat reads v2's io.stat ("MAJ:MIN rbytes=N wbytes=N rios=N ...")
// into v1-shaped entries (Read and Write bytes per device), which is what
// Docker's blkio_stats carries on v2 too.
func parseIOStat(data []byte) []BlkioEntry {
	var out []BlkioEntry
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		dev, rest, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			continue
		}
		majStr, minStr, ok := bytes.Cut(dev, []byte(":"))
		if !ok {
			continue
		}
		major, err1 := strconv.ParseUint(string(majStr), 10, 64)
		minor, err2 := strconv.ParseUint(string(minStr), 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		for _, kv := range bytes.Fields(rest) {
			k, v, _ := bytes.Cut(kv, []byte("="))
			op := ""
			switch string(k) {
			case "rbytes":
				op = "Read"
			case "wbytes":
				op = "Write"
			default:
				continue
			}
			if n, err := strconv.ParseUint(string(v), 10, 64); err == nil {
				out = append(out, BlkioEntry{Major: major, Minor: minor, Op: op, Value: n})
			}
		}
	}
	return out
}

// deviceLines calls each for every line of the file at path that begins
// with a device ("MAJ:MIN ...", as blkio and io.stat files have them),
// with the fields after it; a file that cannot be read has none.
func deviceLines(path string, each func(major, minor uint64, rest []string)) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	parseDeviceLines(data, each)
}

// parseDeviceLines is deviceLines over a file's contents.
func parseDeviceLines(data []byte, each func(major, minor uint64, rest []string)) {
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		majStr, minStr, ok := strings.Cut(fields[0], ":")
		if !ok {
			continue
		}
		major, err1 := strconv.ParseUint(majStr, 10, 64)
		minor, err2 := strconv.ParseUint(minStr, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		each(major, minor, fields[1:])
	}
}

// readV1 reads the v1 control files of cgroup cgroupPath, one hierarchy
// per controller below root.
func readV1(root, cgroupPath string, wantMaxUsage bool) (Sample, error) {
	ctl := func(controller, file string) string {
		return filepath.Join(root, controller, cgroupPath, file)
	}
	s := Sample{Time: time.Now()}
	var err error
	if s.CPUNano, err = readUint(ctl("cpuacct", "cpuacct.usage")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Sample{}, fmt.Errorf("%w: %s", ErrNoCgroup, cgroupPath)
		}
		return Sample{}, err
	}
	if percpu, err := os.ReadFile(ctl("cpuacct", "cpuacct.usage_percpu")); err == nil {
		for _, f := range strings.Fields(string(percpu)) {
			if v, err := strconv.ParseUint(f, 10, 64); err == nil {
				s.PerCPU = append(s.PerCPU, v)
			}
		}
	}
	if kv, err := readKeyValues(ctl("cpuacct", "cpuacct.stat")); err == nil {
		s.CPUSystemNano = kv["system"] * (1e9 / clockTicks)
	}
	usage, err := readUint(ctl("memory", "memory.usage_in_bytes"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Sample{}, err
	}
	if kv, err := readKeyValues(ctl("memory", "memory.stat")); err == nil {
		// Page cache that can be dropped at once is not the container's
		// working set (what docker and podman report).
		if inactive := kv["total_inactive_file"]; inactive < usage {
			usage -= inactive
		}
	}
	s.MemUsage = usage
	if wantMaxUsage {
		if maxUsage, err := readUint(ctl("memory", "memory.max_usage_in_bytes")); err == nil {
			s.MemMaxUsage = maxUsage
		}
	}
	s.MemLimit = physicalMemory()
	if limit, err := readUint(ctl("memory", "memory.limit_in_bytes")); err == nil && limit > 0 && limit < s.MemLimit {
		s.MemLimit = limit
	}
	if pids, err := readUint(ctl("pids", "pids.current")); err == nil {
		s.PIDs = pids
	}
	s.Blkio = readBlkio(ctl("blkio", "blkio.throttle.io_service_bytes_recursive"))
	for _, e := range s.Blkio {
		switch strings.ToLower(e.Op) {
		case "read":
			s.BlockRead += e.Value
		case "write":
			s.BlockWrite += e.Value
		}
	}
	return s, nil
}

func readUint(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseUint(path, data)
}

// parseUint parses a control file holding one number (name names it in
// the error).
func parseUint(name string, data []byte) (uint64, error) {
	v, err := strconv.ParseUint(string(bytes.TrimSpace(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", name, err)
	}
	return v, nil
}

// readKeyValues reads "key value" lines (memory.stat, cpuacct.stat).
func readKeyValues(path string) (map[string]uint64, error) {
	return cgroups.ReadKeyValues(path)
}

// readBlkio reads "MAJ:MIN Op bytes" lines; the "Total" line is skipped.
func readBlkio(path string) []BlkioEntry {
	var out []BlkioEntry
	deviceLines(path, func(major, minor uint64, rest []string) {
		if len(rest) != 2 {
			return
		}
		if v, err := strconv.ParseUint(rest[1], 10, 64); err == nil {
			out = append(out, BlkioEntry{Major: major, Minor: minor, Op: rest[0], Value: v})
		}
	})
	return out
}

// readNetDev sums received and transmitted bytes of every interface but
// loopback in a /proc/PID/net/dev file.
func readNetDev(path string) (rx, tx uint64) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "lo" {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 9 {
			continue
		}
		r, err1 := strconv.ParseUint(fields[0], 10, 64)
		t, err2 := strconv.ParseUint(fields[8], 10, 64)
		if err1 == nil && err2 == nil {
			rx += r
			tx += t
		}
	}
	return rx, tx
}

// sharesHostNetwork reports whether pid is in the engine's own network
// namespace (netns host): the host's traffic is not the container's.
func sharesHostNetwork(pid int) bool {
	own, err1 := ownNetNS()
	theirs, err2 := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid))
	return err1 == nil && err2 == nil && os.SameFile(own, theirs)
}

// ownNetNS is the engine's network namespace, looked up once rather than
// for every container of every stats request.
var ownNetNS = sync.OnceValues(func() (os.FileInfo, error) { return os.Stat("/proc/self/ns/net") })

// physicalMemory is the host's memory, the limit of a container without
// one of its own. It is read once: a stats request would otherwise ask the
// kernel (and the clock, to keep a cache fresh) for every container.
var physicalMemory = sync.OnceValue(func() uint64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return math.MaxUint64
	}
	return uint64(si.Totalram) * uint64(si.Unit)
})

// ContainerStats is one container's usage in Podman's shape (what
// `podman stats` decodes).
type ContainerStats struct {
	AvgCPU        float64
	ContainerID   string
	Name          string
	PerCPU        []uint64
	CPU           float64
	CPUNano       uint64
	CPUSystemNano uint64
	SystemNano    uint64
	MemUsage      uint64
	MemLimit      uint64
	MemPerc       float64
	NetInput      uint64
	NetOutput     uint64
	BlockInput    uint64
	BlockOutput   uint64
	PIDs          uint64
	UpTime        time.Duration
	Duration      uint64
}

// Compute turns a sample into ContainerStats. prev is the previous result
// for the same container (nil for the first): CPU is the usage since then,
// AvgCPU the usage since started.
func Compute(id, name string, started time.Time, s Sample, prev *ContainerStats) ContainerStats {
	now := uint64(s.Time.UnixNano())
	out := ContainerStats{
		ContainerID:   id,
		Name:          name,
		PerCPU:        s.PerCPU,
		CPUNano:       s.CPUNano,
		CPUSystemNano: s.CPUSystemNano,
		SystemNano:    now,
		MemUsage:      s.MemUsage,
		MemLimit:      s.MemLimit,
		NetInput:      s.NetRx,
		NetOutput:     s.NetTx,
		BlockInput:    s.BlockRead,
		BlockOutput:   s.BlockWrite,
		PIDs:          s.PIDs,
		Duration:      s.CPUNano,
		UpTime:        time.Duration(s.CPUNano),
	}
	if s.MemLimit > 0 {
		out.MemPerc = float64(s.MemUsage) / float64(s.MemLimit) * 100
	}
	startNano := uint64(started.UnixNano())
	if !started.IsZero() && now > startNano {
		out.AvgCPU = percent(s.CPUNano, now-startNano)
	}
	switch {
	case prev != nil && prev.CPUNano <= s.CPUNano && prev.SystemNano < now:
		out.CPU = percent(s.CPUNano-prev.CPUNano, now-prev.SystemNano)
	default:
		// No earlier sample (or the cgroup was recreated): the average
		// since start is the best estimate.
		out.CPU = out.AvgCPU
	}
	return out
}

func percent(cpuDelta, wallDelta uint64) float64 {
	if wallDelta == 0 {
		return 0
	}
	return float64(cpuDelta) / float64(wallDelta) * 100
}
