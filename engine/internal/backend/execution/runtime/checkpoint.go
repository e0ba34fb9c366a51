package runtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"google.golang.org/protobuf/encoding/protowire"
)

// CheckpointOptions are the flags of "runtime checkpoint".
type CheckpointOptions struct {
	LeaveRunning, TCPEstablished, FileLocks bool
}

// Files CRIU writes into a checkpoint directory (images and work path).
const (
	// DumpLog and RestoreLog are CRIU's logs of a dump and a restore.
	DumpLog    = "dump.log"
	RestoreLog = "restore.log"
	// StatsDump and StatsRestore hold CRIU's statistics.
	StatsDump    = "stats-dump"
	StatsRestore = "stats-restore"
	// Inventory is the image CRIU writes last in a successful dump.
	Inventory = "inventory.img"
)

// CheckpointTimeout bounds one "runtime checkpoint": a dump that has not
// ended by then is killed with CRIU (ErrCheckpointTimeout). CRIU waits
// without a limit of its own for the container's processes to die once
// it has killed them (its kill's error unchecked): on Debian 13, where an
// AppArmor profile refused CRIU's signal, the dump never returned and the
// container stayed stopped under ptrace. Killed, CRIU lets go of them.
var CheckpointTimeout = 5 * time.Minute

// ErrCheckpointTimeout: the runtime's checkpoint did not end within
// CheckpointTimeout and was killed with CRIU.
var ErrCheckpointTimeout = errors.New("the checkpoint did not finish in time")

// Checkpoint dumps container id with CRIU into dir (images and logs). On a
// failure the error carries CRIU's own error lines from dump.log; a dump
// past CheckpointTimeout is killed with CRIU and answers
// ErrCheckpointTimeout with CRIU's last log line (what it waited for).
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string, o CheckpointOptions) error {
	if r.isPause(id) {
		return errPause("checkpoint", id)
	}
	r.settleFreezer(id)
	args := []string{"checkpoint", "--image-path", dir, "--work-path", dir}
	if o.LeaveRunning {
		args = append(args, "--leave-running")
	}
	if o.TCPEstablished {
		args = append(args, "--tcp-established")
	}
	if o.FileLocks {
		args = append(args, "--file-locks")
	}
	ctx, cancel := context.WithTimeoutCause(ctx, CheckpointTimeout,
		fmt.Errorf("%w: %s checkpoint ran past %v", ErrCheckpointTimeout, r.name, CheckpointTimeout))
	defer cancel()
	if _, err := r.runGroup(ctx, append(args, id)...); err != nil {
		if errors.Is(err, ErrCheckpointTimeout) {
			if last := lastLogLine(filepath.Join(dir, DumpLog)); last != "" {
				return fmt.Errorf("%w; CRIU's last log line: %s", err, last)
			}
			return err
		}
		if detail := CRIUErrors(filepath.Join(dir, DumpLog)); detail != "" {
			return fmt.Errorf("%w; CRIU: %s", err, detail)
		}
		return err
	}
	return nil
}

// lastLogLine is the last line of a log file ("" where it cannot be read).
func lastLogLine(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// DumpComplete tells whether dir holds a checkpoint CRIU finished: its log
// says so and the inventory image exists. A dump interrupted half way
// (engine or runc killed) leaves neither.
func DumpComplete(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, Inventory)); err != nil {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, DumpLog))
	if err != nil {
		// The log goes when the checkpoint was taken without keep.
		return errors.Is(err, os.ErrNotExist)
	}
	return strings.Contains(string(data), "Dumping finished successfully")
}

// RestoreOptions returns the runtime options conmon passes to "runtime restore".
func RestoreOptions(dir string, tcpEstablished, fileLocks bool) []string {
	opts := []string{"--work-path=" + dir}
	if tcpEstablished {
		opts = append(opts, "--tcp-established")
	}
	if fileLocks {
		opts = append(opts, "--file-locks")
	}
	return opts
}

// CRIUConfigAnnotation is the OCI annotation runc reads the path of a
// CRIU configuration file from (without it, runc names
// defaultCRIUConfig). CRIU reads the file after the options runc passes
// and lets it override them.
const CRIUConfigAnnotation = "org.criu.config"

// defaultCRIUConfig is the file runc points CRIU at where a container has
// no CRIUConfigAnnotation: an administrator's settings, which the
// container's own file carries on (WriteCRIUConfig).
var defaultCRIUConfig = "/etc/criu/runc.conf"

// CRIUErrors returns the "Error" lines of a CRIU log (the last three).
func CRIUErrors(logFile string) string {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return ""
	}
	var errs []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "Error") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	if len(errs) > 3 {
		errs = errs[len(errs)-3:]
	}
	return strings.Join(errs, "; ")
}

// statsMagic is the magic of CRIU's statistics images.
const statsMagic = 0x57093306

// Field names of CRIU's dump_stats_entry and restore_stats_entry (stats.proto),
// by field number: the names Podman's criu_statistics report uses.
var (
	dumpStatsFields = map[protowire.Number]string{
		1: "freezing_time", 2: "frozen_time", 3: "memdump_time", 4: "memwrite_time", 5: "pages_scanned",
		6: "pages_skipped_parent", 7: "pages_written", 8: "irmap_resolve", 9: "pages_lazy", 10: "page_pipes",
		11: "page_pipe_bufs", 12: "shpages_scanned", 13: "shpages_skipped_parent", 14: "shpages_written",
	}
	restoreStatsFields = map[protowire.Number]string{
		1: "pages_compared", 2: "pages_skipped_cow", 3: "forking_time", 4: "restore_time", 5: "pages_restored",
	}
)

// ReadStats reads a CRIU statistics image (StatsDump or StatsRestore): the
// service and statistics magics, the payload's size, then a stats_entry
// message whose field 1 is the dump's and field 2 the restore's numbers.
func ReadStats(file string) (map[string]uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if len(data) < 12 || binary.LittleEndian.Uint32(data[4:8]) != statsMagic {
		return nil, fmt.Errorf("%s is not a CRIU statistics image", file)
	}
	size := int(binary.LittleEndian.Uint32(data[8:12]))
	if size > len(data)-12 {
		return nil, fmt.Errorf("%s is truncated", file)
	}
	out := map[string]uint64{}
	msg := data[12 : 12+size]
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, fmt.Errorf("%s: %w", file, protowire.ParseError(n))
		}
		msg = msg[n:]
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
				return nil, fmt.Errorf("%s: %w", file, protowire.ParseError(n))
			}
			msg = msg[n:]
			continue
		}
		inner, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			return nil, fmt.Errorf("%s: %w", file, protowire.ParseError(n))
		}
		msg = msg[n:]
		names := dumpStatsFields
		if num == 2 {
			names = restoreStatsFields
		}
		for len(inner) > 0 {
			fnum, ftyp, n := protowire.ConsumeTag(inner)
			if n < 0 {
				return nil, fmt.Errorf("%s: %w", file, protowire.ParseError(n))
			}
			inner = inner[n:]
			if ftyp == protowire.VarintType {
				v, n := protowire.ConsumeVarint(inner)
				if n < 0 {
					return nil, fmt.Errorf("%s: %w", file, protowire.ParseError(n))
				}
				inner = inner[n:]
				if name, ok := names[fnum]; ok {
					out[name] = v
				}
				continue
			}
			if n = protowire.ConsumeFieldValue(fnum, ftyp, inner); n < 0 {
				return nil, fmt.Errorf("%s: %w", file, protowire.ParseError(n))
			}
			inner = inner[n:]
		}
	}
	return out, nil
}

// FreezeForDump freezes (or thaws) the processes of container id through
// its cgroup, as "runc pause" and "runc resume" would, without starting
// runc: CRIU then finds the cgroup frozen at once, where freezing it itself
// polls the freezer in 100 ms steps. runc derives "paused" from the same
// freezer state. Where the runtime's state names no freezer cgroup, runc
// does it.
func (r *Runtime) FreezeForDump(ctx context.Context, id string, freeze bool) error {
	if cg, ok := r.freezerCgroup(id); ok {
		// Not runc where the cgroup would not freeze: its pause would
		// fail the same way, later.
		if err := cgroups.Host().Freeze(cg, freeze); !errors.Is(err, cgroups.ErrNoCgroup) {
			return err
		}
	}
	if freeze {
		return r.Pause(ctx, id)
	}
	return r.Resume(ctx, id)
}

// freezerCgroup is the cgroup whose freezer holds container id, from the
// runtime's state.json: its freezer hierarchy's on v1, its only one on v2.
func (r *Runtime) freezerCgroup(id string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(r.stateRoot, id, "state.json"))
	if err != nil {
		return "", false
	}
	var st struct {
		CgroupPaths map[string]string `json:"cgroup_paths"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return "", false
	}
	h := cgroups.Host()
	key := "freezer"
	if h.Unified() {
		key = ""
	}
	p, ok := st.CgroupPaths[key]
	if !ok {
		return "", false
	}
	return h.Rel(p)
}
