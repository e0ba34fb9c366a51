package top

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

func TestParseDescriptors(t *testing.T) {
	got, err := ParseDescriptors([]string{"pid,%C", "user"})
	if err != nil || len(got) != 3 || got[0] != "pid" || got[1] != "pcpu" || got[2] != "user" {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, _ := ParseDescriptors(nil); len(got) != len(DefaultDescriptors) {
		t.Fatalf("default: %v", got)
	}
	if _, err := ParseDescriptors([]string{"pid,bogus"}); !errors.Is(err, ErrUnknownDescriptor) {
		t.Fatalf("unknown descriptor: %v", err)
	}
}

func TestListRealCgroup(t *testing.T) {
	name := "berth-top-test-" + strconv.Itoa(os.Getpid())
	dir := filepath.Join("/sys/fs/cgroup/pids", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		need.Skipf(t, "cgroup v1 not writable: %v", err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	descs, _ := ParseDescriptors([]string{"user,pid,hpid,args,tty,etime"})
	res, err := List(Options{CgroupPath: name}, descs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Titles) != 6 || res.Titles[3] != "COMMAND" || len(res.Processes) != 1 {
		t.Fatalf("result %+v", res)
	}
	row := res.Processes[0]
	if row[0] != "root" || row[2] != strconv.Itoa(cmd.Process.Pid) || row[3] != "sleep 30" || row[4] != "?" {
		t.Fatalf("row %v", row)
	}
	// The descriptors beyond ps(1)'s: the process's capability sets,
	// seccomp mode, label, groups and start time, from its /proc status.
	descs, err = ParseDescriptors([]string{"capbnd,capamb,seccomp,label,groups,hgroups,stime"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = List(Options{CgroupPath: name}, descs)
	if err != nil || len(res.Processes) != 1 || len(res.Processes[0]) != 7 {
		t.Fatalf("result %+v, %v", res, err)
	}
	self, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	row = res.Processes[0]
	if row[0] != capSet(self.caps["CapBnd"]) || row[1] != "none" || row[2] != seccompModes[self.seccomp] || row[2] == "?" {
		t.Fatalf("caps and seccomp %v, want bounding %s, ambient none, seccomp %s", row, capSet(self.caps["CapBnd"]), seccompModes[self.seccomp])
	}
	if row[3] == "" {
		t.Fatalf("empty label: %v", row)
	}
	started, err := time.Parse("2006-01-02 15:04:05 -0700 MST", row[6])
	if err != nil || time.Since(started) > time.Minute || time.Until(started) > 2*time.Second {
		t.Fatalf("stime %q (%v)", row[6], err)
	}
}

func TestCapSet(t *testing.T) {
	for mask, want := range map[uint64]string{
		0:                 "none",
		1<<41 - 1:         "full",
		1<<0 | 1<<21:      "CHOWN,SYS_ADMIN",
		1<<13 | 1<<10:     "NET_BIND_SERVICE,NET_RAW",
		1<<41 - 1 - 1<<24: "AUDIT_CONTROL,AUDIT_READ,AUDIT_WRITE,BLOCK_SUSPEND,BPF,CHECKPOINT_RESTORE,CHOWN,DAC_OVERRIDE,DAC_READ_SEARCH,FOWNER,FSETID,IPC_LOCK,IPC_OWNER,KILL,LEASE,LINUX_IMMUTABLE,MAC_ADMIN,MAC_OVERRIDE,MKNOD,NET_ADMIN,NET_BIND_SERVICE,NET_BROADCAST,NET_RAW,PERFMON,SETFCAP,SETGID,SETPCAP,SETUID,SYSLOG,SYS_ADMIN,SYS_BOOT,SYS_CHROOT,SYS_MODULE,SYS_NICE,SYS_PACCT,SYS_PTRACE,SYS_RAWIO,SYS_TIME,SYS_TTY_CONFIG,WAKE_ALARM",
	} {
		if got := capSet(mask); got != want {
			t.Errorf("capSet(%#x) = %s, want %s", mask, got, want)
		}
	}
}
