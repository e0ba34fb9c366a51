package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupMounts are the cgroup hierarchies of the host: every v1 hierarchy
// and the unified one, by mount point.
var cgroupMounts = sync.OnceValues(func() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, after := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(after) < 1 || (after[0] != "cgroup" && after[0] != "cgroup2") {
			continue
		}
		mp := fields[4]
		if !strings.HasPrefix(mp, "/sys/fs/cgroup") || seen[mp] {
			continue
		}
		seen[mp] = true
		out = append(out, mp)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	return out, nil
})

// makeCgroups creates the cgroup path in every hierarchy, as runc's
// cgroupfs manager does: cpuset directories get their parent's CPUs and
// memory nodes, and the devices cgroup denies every device (a pause process
// opens none).
func makeCgroups(path string) ([]string, error) {
	if !filepath.IsAbs(path) || strings.Contains(path, "..") {
		return nil, fmt.Errorf("cgroup path %q is not absolute", path)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var made []string
	for _, mp := range mounts {
		dir := filepath.Join(mp, path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			removeCgroups(made)
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		made = append(made, dir)
		if _, err := os.Stat(filepath.Join(mp, "cpuset.cpus")); err == nil {
			if err := inheritCpuset(mp, path); err != nil {
				removeCgroups(made)
				return nil, err
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "devices.deny")); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "devices.deny"), []byte("a"), 0o644); err != nil {
				removeCgroups(made)
				return nil, fmt.Errorf("cgroup %s: deny devices: %w", dir, err)
			}
		}
	}
	return made, nil
}

// inheritCpuset fills the empty cpuset.cpus and cpuset.mems of every level
// of path below the hierarchy's root from the level above: a v1 cpuset
// cgroup without them cannot take a process.
func inheritCpuset(mp, path string) error {
	parent := mp
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		dir := filepath.Join(parent, part)
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(cur)) != "" {
				continue
			}
			up, err := os.ReadFile(filepath.Join(parent, file))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, file), up, 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %s: %w", dir, file, err)
			}
		}
		parent = dir
	}
	return nil
}

// removeCgroups removes the cgroup directories (each must be empty of
// processes by now).
func removeCgroups(paths []string) error {
	var errs []error
	for _, p := range paths {
		if !strings.HasPrefix(p, "/sys/fs/cgroup/") {
			errs = append(errs, fmt.Errorf("unexpected cgroup path %q", p))
			continue
		}
		if err := removeCgroup(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveStrayCgroup kills whatever still runs in a container's cgroup
// (path as in its spec) and removes it, in every hierarchy, when the
// runtime holds no state for the container: a create cut by a kill -9
// after its process joined the cgroup but before its state was written (a
// pause process between its spawn and its state.json) leaves a process
// nobody knows, in a cgroup that keeps its pod's cgroup from going.
func (r *Runtime) RemoveStrayCgroup(id, path string) error {
	if r.Exists(id) || !filepath.IsAbs(path) || strings.Contains(path, "..") || filepath.Clean(path) == "/" {
		return nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var dirs []string
	for _, mp := range mounts {
		if _, err := os.Stat(filepath.Join(mp, path)); err == nil {
			dirs = append(dirs, filepath.Join(mp, path))
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := 0
		for _, d := range dirs {
			data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					unix.Kill(pid, unix.SIGKILL)
					left++
				}
			}
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
	}
	return removeCgroups(dirs)
}
