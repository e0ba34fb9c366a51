package stats

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// BlkioEntry is one line of a blkio counter file.
type BlkioEntry struct {
	Major uint64 `json:"major"`
	Minor uint64 `json:"minor"`
	Op    string `json:"op"`
	Value uint64 `json:"value"`
}

// CPUUsage is Docker's cpu_usage object.
type CPUUsage struct {
	TotalUsage        uint64   `json:"total_usage"`
	PercpuUsage       []uint64 `json:"percpu_usage,omitempty"`
	UsageInKernelmode uint64   `json:"usage_in_kernelmode"`
	UsageInUsermode   uint64   `json:"usage_in_usermode"`
}

// ThrottlingData is Docker's throttling_data object.
type ThrottlingData struct {
	Periods          uint64 `json:"periods"`
	ThrottledPeriods uint64 `json:"throttled_periods"`
	ThrottledTime    uint64 `json:"throttled_time"`
}

// CPUStats is Docker's cpu_stats object plus Podman's "cpu" percentage.
type CPUStats struct {
	CPUUsage       CPUUsage       `json:"cpu_usage"`
	SystemUsage    uint64         `json:"system_cpu_usage,omitempty"`
	OnlineCPUs     uint32         `json:"online_cpus,omitempty"`
	ThrottlingData ThrottlingData `json:"throttling_data,omitempty"`
	CPU            float64        `json:"cpu"`
}

// MemoryStats is Docker's memory_stats object.
type MemoryStats struct {
	Usage    uint64            `json:"usage,omitempty"`
	MaxUsage uint64            `json:"max_usage,omitempty"`
	Stats    map[string]uint64 `json:"stats,omitempty"`
	Failcnt  uint64            `json:"failcnt,omitempty"`
	Limit    uint64            `json:"limit,omitempty"`
}

// NetworkStats is one entry of Docker's networks object.
type NetworkStats struct {
	RxBytes   uint64 `json:"rx_bytes"`
	RxPackets uint64 `json:"rx_packets"`
	RxErrors  uint64 `json:"rx_errors"`
	RxDropped uint64 `json:"rx_dropped"`
	TxBytes   uint64 `json:"tx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxErrors  uint64 `json:"tx_errors"`
	TxDropped uint64 `json:"tx_dropped"`
}

// DockerStats is one container's usage in the Docker-compatible shape that
// Podman serves on the per-container stats route.
type DockerStats struct {
	Read      time.Time `json:"read"`
	PreRead   time.Time `json:"preread"`
	PidsStats struct {
		Current uint64 `json:"current,omitempty"`
		Limit   uint64 `json:"limit,omitempty"`
	} `json:"pids_stats"`
	BlkioStats struct {
		IoServiceBytesRecursive []BlkioEntry `json:"io_service_bytes_recursive"`
	} `json:"blkio_stats"`
	NumProcs     uint32                  `json:"num_procs"`
	StorageStats struct{}                `json:"storage_stats"`
	CPUStats     CPUStats                `json:"cpu_stats"`
	PreCPUStats  CPUStats                `json:"precpu_stats"`
	MemoryStats  MemoryStats             `json:"memory_stats"`
	Name         string                  `json:"name"`
	ID           string                  `json:"id"`
	Networks     map[string]NetworkStats `json:"networks"`
}

// Docker builds the Docker-shaped report from a Podman-shaped one and the
// sample it came from; prev is the previous report of the stream (nil for
// the first).
func Docker(cs ContainerStats, s Sample, prev *DockerStats) DockerStats {
	var d DockerStats
	d.Read = s.Time
	d.ID = cs.ContainerID
	d.Name = cs.Name
	d.PidsStats.Current = s.PIDs
	d.BlkioStats.IoServiceBytesRecursive = s.Blkio
	if d.BlkioStats.IoServiceBytesRecursive == nil {
		d.BlkioStats.IoServiceBytesRecursive = []BlkioEntry{}
	}
	d.CPUStats = CPUStats{
		CPUUsage: CPUUsage{
			TotalUsage:        s.CPUNano,
			PercpuUsage:       s.PerCPU,
			UsageInKernelmode: s.CPUSystemNano,
			UsageInUsermode:   s.CPUNano - min(s.CPUSystemNano, s.CPUNano),
		},
		SystemUsage: systemCPUUsage(),
		OnlineCPUs:  uint32(len(s.PerCPU)),
		CPU:         cs.CPU,
	}
	d.MemoryStats = MemoryStats{Usage: s.MemUsage, MaxUsage: s.MemMaxUsage, Limit: s.MemLimit}
	d.Networks = map[string]NetworkStats{"network": {RxBytes: s.NetRx, TxBytes: s.NetTx}}
	if prev != nil {
		d.PreRead = prev.Read
		d.PreCPUStats = prev.CPUStats
	}
	return d
}

// systemCPUUsage is the host's total CPU time in nanoseconds, from the
// first line of /proc/stat (what Docker reports as system_cpu_usage).
func systemCPUUsage() uint64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 2 || fields[0] != "cpu" {
		return 0
	}
	var ticks uint64
	for _, v := range fields[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			ticks += n
		}
	}
	return ticks * (1e9 / clockTicks)
}
