// Package userns keeps the host side of user namespaces: the subordinate
// ID ranges of the "containers" user in /etc/subuid and /etc/subgid, from
// which --userns=auto takes a range per container (containers/storage
// allocates it, keeping the used ranges in its container store so that an
// engine restart or kill -9 neither loses nor frees one twice), and the
// checks an explicit --uidmap/--gidmap must pass.
package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// User is the name whose subordinate ranges containers take, as Podman's
// root_auto_userns_user.
const User = "containers"

// DefaultStart and DefaultSize are the range the engine gives User where
// the host gives it none: the upper half of the 32-bit ID space, which
// useradd never hands out (Podman's documentation suggests the same).
const (
	DefaultStart = 2147483647
	DefaultSize  = 2147483648
)

// Files are the subordinate ID files.
type Files struct {
	SubUID, SubGID string
}

// HostFiles are the host's files, which containers/storage reads.
var HostFiles = Files{SubUID: "/etc/subuid", SubGID: "/etc/subgid"}

// Range is one subordinate range [Start, Start+Size).
type Range struct {
	Start, Size uint64
}

// Ranges are User's subordinate UIDs and GIDs.
type Ranges struct {
	UIDs, GIDs []Range
}

// Ensure gives User a range in each file where it has none, writing the
// file anew (a temporary file renamed over it, so a crash leaves the old
// or the new one), and answers User's ranges.
func Ensure(f Files) (Ranges, error) {
	var r Ranges
	var err error
	if r.UIDs, err = ensureFile(f.SubUID); err != nil {
		return r, err
	}
	if r.GIDs, err = ensureFile(f.SubGID); err != nil {
		return r, err
	}
	return r, nil
}

func ensureFile(path string) ([]Range, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ranges, err := parse(data, path)
	if err != nil {
		return nil, err
	}
	if len(ranges) > 0 {
		return ranges, nil
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, fmt.Sprintf("%s:%d:%d\n", User, DefaultStart, DefaultSize)...)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	return []Range{{Start: DefaultStart, Size: DefaultSize}}, nil
}

// parse reads User's lines ("name:start:count") of a subordinate ID file.
func parse(data []byte, path string) ([]Range, error) {
	var out []Range
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 3 || f[0] != User {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		size, err2 := strconv.ParseUint(f[2], 10, 33)
		if err1 != nil || err2 != nil || size == 0 || start+size > 1<<32 {
			return nil, fmt.Errorf("%s line %d: %q is not a valid range", path, n, line)
		}
		out = append(out, Range{Start: start, Size: size})
	}
	return out, sc.Err()
}

// CheckMaps checks an explicit mapping: every range well formed, the
// container IDs not mapped twice, every host range inside ranges and
// outside the ranges in use (other containers' mappings). field names the
// option in the error ("uidmap" or "gidmap").
func CheckMaps(field string, maps []core.IDMap, ranges []Range, inUse []core.IDMap) error {
	for i, m := range maps {
		if m.Size <= 0 || m.ContainerID < 0 || m.HostID < 0 || uint64(m.ContainerID)+uint64(m.Size) > 1<<32 || uint64(m.HostID)+uint64(m.Size) > 1<<32 {
			return core.InvalidArgument(field, fmt.Errorf("%d:%d:%d is not a valid range", m.ContainerID, m.HostID, m.Size))
		}
		for _, o := range maps[:i] {
			if overlap(uint64(m.ContainerID), uint64(m.Size), uint64(o.ContainerID), uint64(o.Size)) {
				return core.InvalidArgument(field, fmt.Errorf("container IDs %d:%d:%d are mapped twice", m.ContainerID, m.HostID, m.Size))
			}
			if overlap(uint64(m.HostID), uint64(m.Size), uint64(o.HostID), uint64(o.Size)) {
				return core.InvalidArgument(field, fmt.Errorf("host IDs %d:%d:%d are mapped twice", m.ContainerID, m.HostID, m.Size))
			}
		}
		if !inside(uint64(m.HostID), uint64(m.Size), ranges) {
			return core.InvalidArgument(field, fmt.Errorf("host IDs %d..%d are not within the %s user's subordinate ranges (%s)", m.HostID, m.HostID+m.Size-1, User, describe(ranges)))
		}
		for _, u := range inUse {
			if overlap(uint64(m.HostID), uint64(m.Size), uint64(u.HostID), uint64(u.Size)) {
				return core.InvalidArgument(field, fmt.Errorf("host IDs %d..%d overlap another container's user namespace (%d..%d)", m.HostID, m.HostID+m.Size-1, u.HostID, u.HostID+u.Size-1))
			}
		}
	}
	return nil
}

func overlap(a, an, b, bn uint64) bool { return a < b+bn && b < a+an }

// inside tells whether [start, start+size) lies in the union of ranges.
func inside(start, size uint64, ranges []Range) bool {
	end := start + size
	for start < end {
		advanced := false
		for _, r := range ranges {
			if start >= r.Start && start < r.Start+r.Size {
				start = r.Start + r.Size
				advanced = true
			}
		}
		if !advanced {
			return false
		}
	}
	return true
}

func describe(ranges []Range) string {
	if len(ranges) == 0 {
		return "none"
	}
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = fmt.Sprintf("%d..%d", r.Start, r.Start+r.Size-1)
	}
	return strings.Join(parts, ", ")
}
