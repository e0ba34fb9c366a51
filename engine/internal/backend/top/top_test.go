package top

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal(err)
		}
		t.Skipf("cgroup v1 not writable: %v", err)
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
}
