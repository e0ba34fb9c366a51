package stats

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

func TestReadFakeHierarchy(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"cpuacct/ctr/cpuacct.usage":                           "2000000000\n",
		"cpuacct/ctr/cpuacct.usage_percpu":                    "1500000000 500000000 \n",
		"cpuacct/ctr/cpuacct.stat":                            "user 150\nsystem 50\n",
		"memory/ctr/memory.usage_in_bytes":                    "10485760\n",
		"memory/ctr/memory.stat":                              "cache 100\ntotal_inactive_file 1048576\n",
		"memory/ctr/memory.limit_in_bytes":                    "20971520\n",
		"pids/ctr/pids.current":                               "3\n",
		"blkio/ctr/blkio.throttle.io_service_bytes_recursive": "8:0 Read 4096\n8:0 Write 8192\n8:16 Read 4096\nTotal 16384\n",
	}
	writeFiles(t, root, files)
	s, err := Reader{Root: root}.Read("ctr", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUNano != 2e9 || s.CPUSystemNano != 5e8 || len(s.PerCPU) != 2 {
		t.Fatalf("cpu: %+v", s)
	}
	if s.MemUsage != 9437184 || s.MemLimit != 20971520 || s.PIDs != 3 || s.BlockRead != 8192 || s.BlockWrite != 8192 {
		t.Fatalf("sample: %+v", s)
	}
	started := s.Time.Add(-4 * time.Second)
	first := Compute("id", "name", started, s, nil)
	if first.AvgCPU < 49 || first.AvgCPU > 51 || first.CPU != first.AvgCPU || first.MemPerc != 45 {
		t.Fatalf("first stats: %+v", first)
	}
	next := s
	next.CPUNano += 1e9
	next.Time = s.Time.Add(time.Second)
	second := Compute("id", "name", started, next, &first)
	if second.CPU < 99 || second.CPU > 101 {
		t.Fatalf("cpu over the interval: %v", second.CPU)
	}
	if _, err := (Reader{Root: root}).Read("gone", 0); !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("missing cgroup: %v", err)
	}
}

// TestReadFakeUnified reads the v2 control files of a cgroup below a root
// that holds cgroup.controllers (the unified hierarchy).
func TestReadFakeUnified(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"cgroup.controllers":  "cpu io memory pids\n",
		"ctr/cpu.stat":        "usage_usec 2000000\nuser_usec 1500000\nsystem_usec 500000\n",
		"ctr/memory.current":  "10485760\n",
		"ctr/memory.stat":     "anon 100\ninactive_file 1048576\n",
		"ctr/memory.max":      "20971520\n",
		"ctr/memory.peak":     "12582912\n",
		"ctr/pids.current":    "3\n",
		"ctr/io.stat":         "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n8:16 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
		"free/cpu.stat":       "usage_usec 1\nuser_usec 1\nsystem_usec 0\n",
		"free/memory.current": "4096\n",
		"free/memory.max":     "max\n",
	}
	writeFiles(t, root, files)
	s, err := Reader{Root: root, Docker: true}.Read("/ctr", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Podman's figures: the usage is memory.stat's anon, no peak.
	if lean, err := (Reader{Root: root}).Read("/ctr", 0); err != nil || lean.MemMaxUsage != 0 || lean.MemUsage != 100 || lean.MemLimit != 20971520 {
		t.Fatalf("Podman's memory figures: %+v %v", lean, err)
	}
	if s.CPUNano != 2e9 || s.CPUSystemNano != 5e8 || len(s.PerCPU) != 0 {
		t.Fatalf("cpu: %+v", s)
	}
	if s.MemUsage != 9437184 || s.MemLimit != 20971520 || s.MemMaxUsage != 12582912 || s.PIDs != 3 || s.BlockRead != 8192 || s.BlockWrite != 8192 || len(s.Blkio) != 4 {
		t.Fatalf("sample: %+v", s)
	}
	free, err := Reader{Root: root}.Read("/free", 0)
	if err != nil {
		t.Fatal(err)
	}
	if free.MemLimit != physicalMemory() {
		t.Fatalf("an unlimited cgroup's limit %d, want the host's memory", free.MemLimit)
	}
	if _, err := (Reader{Root: root}).Read("/gone", 0); !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("missing cgroup: %v", err)
	}
}

// TestReadRealCgroup puts a process into fresh cgroup v1 groups and reads
// them back through the kernel's files.
func TestReadRealCgroup(t *testing.T) {
	name := "berth-stats-test-" + strconv.Itoa(os.Getpid())
	var dirs []string
	for _, c := range []string{"cpuacct", "memory", "pids"} {
		d := filepath.Join(DefaultRoot, c, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			need.Skipf(t, "cgroup v1 not writable here: %v", err)
		}
		dirs = append(dirs, d)
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, d := range dirs {
			for i := 0; i < 50 && os.Remove(d) != nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s outlived the test", d)
			}
		}
	})
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	s, err := Reader{}.Read(name, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if s.PIDs < 1 || s.PIDs > 2 || s.CPUNano == 0 || s.MemLimit == 0 {
		t.Fatalf("real cgroup sample: %+v", s)
	}
	// The test process shares the host's network namespace: no traffic is
	// attributed to it.
	if s.NetRx != 0 || s.NetTx != 0 {
		t.Fatalf("host network counted for a process in the host namespace: %+v", s)
	}
}

// writeFiles lays out a fake cgroup hierarchy under root: each file of
// files (a path below root) with its content.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// v2Files are a running busybox's control files as Debian 12's kernel
// (6.1) writes them.
var v2Files = map[string][]byte{
	"cpu.stat":       []byte("usage_usec 31062\nuser_usec 10355\nsystem_usec 20706\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n"),
	"memory.current": []byte("421888\n"),
	"memory.max":     []byte("max\n"),
	"pids.current":   []byte("1\n"),
	"io.stat":        []byte("254:0 rbytes=1212416 wbytes=0 rios=29 wios=0 dbytes=0 dios=0\n"),
	"memory.stat":    []byte("anon 65536\nfile 241664\nkernel 110592\nkernel_stack 16384\npagetables 12288\nsec_pagetables 0\npercpu 720\nsock 0\nvmalloc 0\nshmem 0\nzswap 0\nzswapped 0\nfile_mapped 237568\nfile_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\nfile_thp 0\nshmem_thp 0\ninactive_anon 61440\nactive_anon 4096\ninactive_file 241664\nactive_file 0\nunevictable 0\nslab_reclaimable 49152\nslab_unreclaimable 29896\nslab 79048\nworkingset_refault_anon 0\nworkingset_refault_file 0\nworkingset_activate_anon 0\nworkingset_activate_file 0\nworkingset_restore_anon 0\nworkingset_restore_file 0\nworkingset_nodereclaim 0\npgscan 0\npgsteal 0\npgscan_kswapd 0\npgscan_direct 0\npgsteal_kswapd 0\npgsteal_direct 0\npgfault 1179\npgmajfault 26\npgrefill 0\npgactivate 0\npgdeactivate 0\npglazyfree 0\npglazyfreed 0\nzswpin 0\nzswpout 0\nthp_fault_alloc 0\nthp_collapse_alloc 0\n"),
}

// BenchmarkReadUnified is the parsing side of one container's sample on
// cgroup v2 (the files come from memory): what the engine's CPU does per
// container and request on top of the kernel's reads.
func BenchmarkReadUnified(b *testing.B) {
	read := func(name string, buf []byte) ([]byte, error) {
		if data, ok := v2Files[name]; ok {
			return append(buf[:0], data...), nil
		}
		return nil, fs.ErrNotExist
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s, err := readUnified("/ctr", read, false)
		if err != nil || s.MemUsage != 65536 || s.CPUNano != 31062000 || s.BlockRead != 1212416 {
			b.Fatalf("%+v %v", s, err)
		}
	}
}
