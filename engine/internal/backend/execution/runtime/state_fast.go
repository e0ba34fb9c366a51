package runtime

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// stateFromFiles answers "runc state" from runc's own files, the way runc
// derives it, without starting runc: an engine start reconciles every
// created, running and paused container, and a runc process each made that
// cost seconds with a hundred containers. It answers ok=false whenever
// anything is not as expected (a create in progress has no state.json yet,
// a runc that writes another format), and the caller asks runc.
//
// runc's rule (libcontainer's refreshState): paused when the container's
// freezer cgroup is frozen; otherwise created or running while the init
// process recorded in state.json lives (same start time, not a zombie),
// created as long as its exec.fifo exists; stopped once it is gone.
func (r *Runtime) stateFromFiles(id string) (State, bool) {
	dir := filepath.Join(r.stateRoot, id)
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return State{}, false
	}
	var st struct {
		Pid         int               `json:"init_process_pid"`
		Start       json.Number       `json:"init_process_start"`
		CgroupPaths map[string]string `json:"cgroup_paths"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&st); err != nil || st.Pid <= 0 || st.Start == "" {
		return State{}, false
	}
	paused, ok := frozen(st.CgroupPaths)
	if !ok {
		return State{}, false
	}
	if paused {
		return State{Status: "paused", Pid: st.Pid}, true
	}
	start, state, ok := procStart(st.Pid)
	if !ok || start != st.Start.String() || state == "Z" || state == "X" {
		return State{Status: "stopped"}, true
	}
	if _, err := os.Stat(filepath.Join(dir, "exec.fifo")); err == nil {
		return State{Status: "created", Pid: st.Pid}, true
	}
	return State{Status: "running", Pid: st.Pid}, true
}

// frozen reads the freezer state of a container's cgroups: cgroup v1's
// freezer.state, or cgroup v2's cgroup.freeze where no v1 freezer is used.
func frozen(paths map[string]string) (paused, ok bool) {
	if p, has := paths["freezer"]; has {
		data, err := os.ReadFile(filepath.Join(p, "freezer.state"))
		if os.IsNotExist(err) {
			return false, true // the cgroup is gone with the container
		}
		if err != nil {
			return false, false
		}
		switch strings.TrimSpace(string(data)) {
		case "THAWED":
			return false, true
		case "FROZEN":
			return true, true
		}
		return false, false // FREEZING: let runc wait it out
	}
	if p, has := paths[""]; has {
		data, err := os.ReadFile(filepath.Join(p, "cgroup.freeze"))
		if os.IsNotExist(err) {
			return false, true
		}
		if err != nil {
			return false, false
		}
		return strings.TrimSpace(string(data)) == "1", true
	}
	return false, false
}

// procStart answers a process's start time (clock ticks since boot, as
// /proc/PID/stat's 22nd field) and its state letter; ok=false when it does
// not exist.
func procStart(pid int) (start, state string, ok bool) {
	state, _, ticks, err := procStat(pid)
	if err != nil {
		return "", "", false
	}
	return strconv.FormatUint(ticks, 10), state, true
}
