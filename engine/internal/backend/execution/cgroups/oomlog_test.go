package cgroups

import (
	"testing"
	"time"
)

func TestParseOOMRecord(t *testing.T) {
	const pod = "/berth/berth-pod-0c13"
	for _, c := range []struct {
		name, rec string
		at        time.Duration
		memcg     string
		ok        bool
	}{
		{"memcg summary",
			"6,72745,19372865054,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=berth-d6d1,mems_allowed=0,oom_memcg=" + pod + ",task_memcg=" + pod + "/berth-d6d1,task=busybox,pid=16442,uid=0\n",
			19372865054 * time.Microsecond, pod + "/berth-d6d1", true},
		{"systemd scope, continuation lines",
			"6,9,1500000,c;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/machine.slice/berth-a.scope,task_memcg=/machine.slice/berth-a.scope,task=sh,pid=9,uid=0\n SUBSYSTEM=x\n",
			1500 * time.Millisecond, "/machine.slice/berth-a.scope", true},
		// A process names itself: its name cannot move the cgroup.
		{"hostile task name",
			"6,1,5,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/a.scope,task=,task_memcg=/b,pid=1,uid=0\n",
			5 * time.Microsecond, "/a.scope", true},
		{"the kill line without a cgroup", "3,2,7,-;Memory cgroup out of memory: Killed process 42 (sh)\n", 0, "", false},
		{"another message", "6,1,5,-;eth0: link up\n", 0, "", false},
		{"no header", "oom-kill:task_memcg=/a,task=sh\n", 0, "", false},
		{"bad timestamp", "6,1,x,-;oom-kill:oom_memcg=/a,task_memcg=/a,task=sh\n", 0, "", false},
		{"relative cgroup", "6,1,5,-;oom-kill:global_oom,task_memcg=a,task=sh\n", 0, "", false},
		{"cut short", "6,1,5,-;oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/a", 0, "", false},
	} {
		at, memcg, ok := parseOOMRecord([]byte(c.rec))
		if ok != c.ok || memcg != c.memcg || at != c.at {
			t.Errorf("%s: got (%v, %q, %v), want (%v, %q, %v)", c.name, at, memcg, ok, c.at, c.memcg, c.ok)
		}
	}
}

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		victim, cg string
		want       bool
	}{
		{"/machine.slice/berth-a.scope", "machine.slice/berth-a.scope", true},
		{"/machine.slice/berth-a.scope", "/machine.slice/berth-a.scope", true},
		{"/machine.slice/berth-a.scope/init", "/machine.slice/berth-a.scope", true},
		{"/machine.slice/berth-ab.scope", "/machine.slice/berth-a", false},
		{"/machine.slice", "/machine.slice/berth-a.scope", false},
	} {
		if got := under(c.victim, c.cg); got != c.want {
			t.Errorf("under(%q, %q) = %v", c.victim, c.cg, got)
		}
	}
}

// FuzzParseOOMRecord: any record parses without panicking, and a cgroup it
// returns is the absolute path the kernel wrote after task_memcg=.
func FuzzParseOOMRecord(f *testing.F) {
	f.Add([]byte("6,72745,19372865054,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=c,mems_allowed=0,oom_memcg=/a,task_memcg=/a/b,task=sh,pid=1,uid=0\n"))
	f.Add([]byte("6,1,5,-;eth0: link up\n"))
	f.Fuzz(func(t *testing.T, rec []byte) {
		at, memcg, ok := parseOOMRecord(rec)
		if !ok {
			return
		}
		if at < 0 || len(memcg) == 0 || memcg[0] != '/' {
			t.Fatalf("parsed (%v, %q) from %q", at, memcg, rec)
		}
	})
}
