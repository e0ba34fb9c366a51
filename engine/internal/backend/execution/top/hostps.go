package top

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
)

// Docker's top runs ps(1) on the host and keeps the lines of the
// container's processes: host PIDs, any ps options, and nothing needed in
// the container (which may have no ps). HostPS is that.

// DefaultHostPSArgs are the ps options Docker's top uses when the client
// names none.
const DefaultHostPSArgs = "-ef"

// ErrNoPIDColumn is wrapped when ps's output has no PID column to tell the
// container's processes by.
var ErrNoPIDColumn = errors.New("Couldn't find PID field in ps output")

// renamedPID finds a ps option that renames the PID column (pid=PID, or
// another column given the PID title), which would hide or fake it.
var renamedPID = regexp.MustCompile(`\s+([^\s]*)=\s*(PID[^\s]*)`)

// CheckHostPSArgs refuses options that rename a column to PID, except the
// pid column itself.
func CheckHostPSArgs(psArgs string) error {
	for _, m := range renamedPID.FindAllStringSubmatch(psArgs, -1) {
		if m[1] != "pid" {
			return fmt.Errorf("specifying \"%s=%s\" is not allowed", m[1], m[2])
		}
	}
	return nil
}

// HostPS runs ps with psArgs (DefaultHostPSArgs when empty) on the host and
// returns the lines of the processes in the cgroup opts names, with ps's
// own titles.
func HostPS(ctx context.Context, opts Options, psArgs string) (*Result, error) {
	if psArgs == "" {
		psArgs = DefaultHostPSArgs
	}
	if err := CheckHostPSArgs(psArgs); err != nil {
		return nil, err
	}
	pids, err := cgroups.At(opts.CgroupRoot).Procs(opts.CgroupPath)
	if err != nil {
		return nil, fmt.Errorf("read container processes: %w", err)
	}
	args := strings.Split(psArgs, " ")
	list := make([]string, len(pids))
	for i, p := range pids {
		list[i] = strconv.Itoa(p)
	}
	// Asking ps for the container's processes only (-q) is quicker; some
	// options (f) refuse it, and then ps lists every process.
	out, err := exec.CommandContext(ctx, "ps", append(args, "-q"+strings.Join(list, ","))...).Output()
	if err != nil {
		if out, err = exec.CommandContext(ctx, "ps", args...).Output(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				if first, _, _ := bytes.Cut(exit.Stderr, []byte("\n")); len(first) > 0 {
					err = errors.New(string(first))
				}
			}
			return nil, fmt.Errorf("ps: %w", err)
		}
	}
	return parseHostPS(out, pids)
}

// parseHostPS keeps the lines of ps's output whose PID is one of pids, and
// the thread lines (PID "-") that follow one of them. Each line is split
// into as many fields as there are titles, the last holding the rest.
func parseHostPS(out []byte, pids []int) (*Result, error) {
	lines := strings.Split(string(out), "\n")
	res := &Result{Titles: asciiFields(lines[0]), Processes: [][]string{}}
	col := slices.Index(res.Titles, "PID")
	if col < 0 {
		return nil, ErrNoPIDColumn
	}
	keep := false
	for _, line := range lines[1:] {
		fields := asciiFields(line)
		if len(fields) <= col {
			continue
		}
		if fields[col] != "-" {
			pid, err := strconv.Atoi(fields[col])
			if err != nil {
				return nil, fmt.Errorf("unexpected pid %q in ps output: %w", fields[col], err)
			}
			keep = slices.Contains(pids, pid)
		}
		if !keep {
			continue
		}
		if n := len(res.Titles); len(fields) > n {
			fields = append(fields[:n-1], strings.Join(fields[n-1:], " "))
		}
		res.Processes = append(res.Processes, fields)
	}
	return res, nil
}

// asciiFields splits s at ASCII white space only (a command line may hold
// other spaces).
func asciiFields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r'
	})
}
