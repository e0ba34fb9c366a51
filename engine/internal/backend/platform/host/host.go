// Package host reads what the engine reports about the machine it runs on:
// kernel, distribution, memory, CPU time, uptime, cgroups and the external
// programs (conmon, the OCI runtime) with their versions. It knows nothing
// of the engine's stores; the system service above them reports these facts.
package host

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// versionPattern finds a version number in a program's --version output.
var versionPattern = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// Component describes an external program: where it is and what version it says it is.
func Component(name, pkg string, paths ...string) *core.ComponentInfo {
	info := &core.ComponentInfo{Package: pkg}
	path, err := exec.LookPath(name)
	if err != nil {
		for _, candidate := range paths {
			if st, err := os.Stat(candidate); err == nil && !st.IsDir() {
				path = candidate
				break
			}
		}
	}
	if path == "" {
		return info
	}
	info.Path = path
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return info
	}
	first, _, _ := strings.Cut(string(out), "\n")
	info.Version = strings.TrimSpace(first)
	if v := versionPattern.FindString(first); v != "" {
		info.Package = fmt.Sprintf("%s_%s", pkg, v)
	}
	return info
}

// KernelVersion is the running kernel's release.
func KernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// Machine is the kernel's name for the hardware (uname -m).
func Machine() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Machine[:])
}

// Distribution reads /etc/os-release.
func Distribution() core.DistributionInfo {
	var d core.DistributionInfo
	f, err := os.Open("/etc/os-release")
	if err != nil {
		return d
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"`)
		switch k {
		case "ID":
			d.Distribution = v
		case "VERSION_ID":
			d.Version = v
		case "VERSION_CODENAME":
			d.Codename = v
		case "VARIANT_ID":
			d.Variant = v
		case "PRETTY_NAME":
			d.PrettyName = v
		}
	}
	return d
}

// Memory reads total and free memory and swap from /proc/meminfo, in bytes.
func Memory() (memTotal, memFree, swapTotal, swapFree int64) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			memTotal = kb * 1024
		case "MemAvailable:":
			memFree = kb * 1024
		case "SwapTotal:":
			swapTotal = kb * 1024
		case "SwapFree:":
			swapFree = kb * 1024
		}
	}
	return
}

// CPUUsage is the CPU time split since boot, from /proc/stat.
func CPUUsage() *core.CPUUsage {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return &core.CPUUsage{}
	}
	first, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(first)
	if len(fields) < 5 || fields[0] != "cpu" {
		return &core.CPUUsage{}
	}
	var values []float64
	var total float64
	for _, f := range fields[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		values = append(values, v)
		total += v
	}
	if total == 0 {
		return &core.CPUUsage{}
	}
	round := func(v float64) float64 { return float64(int(v/total*10000)) / 100 }
	return &core.CPUUsage{UserPercent: round(values[0] + values[1]), SystemPercent: round(values[2]), IdlePercent: round(values[3])}
}

// Uptime is the host's uptime, formatted like Podman ("1h 2m 3.45s").
func Uptime() string {
	data, err := os.ReadFile("/proc/Uptime")
	if err != nil {
		return ""
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	if err != nil {
		return ""
	}
	d := time.Duration(secs * float64(time.Second)).Round(10 * time.Millisecond)
	return fmt.Sprintf("%dh %dm %.2fs", int(d.Hours()), int(d.Minutes())%60, float64(d%time.Minute)/float64(time.Second))
}
