// Package rootfs reads files of a container's root filesystem from the host
// without following symbolic links, so a container cannot point the engine
// at host files; and resolves user and group names the way the container
// sees them.
package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrSymlink is returned when a path component inside the rootfs is a
// symbolic link.
var ErrSymlink = errors.New("symbolic link in container path")

// ErrNoSuchUser is returned for a user or group name the container's
// passwd or group file does not list.
var ErrNoSuchUser = errors.New("no such user or group in the container")

// maxFile bounds what ReadFile reads (passwd and group files are small).
const maxFile = 4 << 20

// ReadFile reads rel (slash-separated, relative to root) refusing symlinks
// on the way.
func ReadFile(root, rel string) ([]byte, error) {
	if root == "" {
		return nil, fmt.Errorf("read %s: container root filesystem is not mounted: %w", rel, fs.ErrNotExist)
	}
	p := root
	for _, part := range strings.Split(strings.Trim(filepath.ToSlash(rel), "/"), "/") {
		if part == "" || part == "." || part == ".." {
			return nil, fmt.Errorf("read %s: invalid path", rel)
		}
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("read %s: %w", rel, ErrSymlink)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxFile {
		return nil, fmt.Errorf("read %s: not a regular file of at most %d bytes", rel, maxFile)
	}
	buf := make([]byte, st.Size())
	n, err := f.Read(buf)
	if err != nil && n == 0 && st.Size() > 0 {
		return nil, err
	}
	return buf[:n], nil
}

// Entry is one line of a passwd or group file.
type Entry struct {
	Name string
	ID   uint32
	// GID is the primary group of a passwd entry.
	GID uint32
}

// Entries parses "name:x:id:gid:..." lines; malformed lines are skipped.
func Entries(data []byte) []Entry {
	var out []Entry
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 3 || f[0] == "" {
			continue
		}
		id, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		e := Entry{Name: f[0], ID: uint32(id)}
		if len(f) > 3 {
			if gid, err := strconv.ParseUint(f[3], 10, 32); err == nil {
				e.GID = uint32(gid)
			}
		}
		out = append(out, e)
	}
	return out
}

// Names maps ids to the first name listed for them in root's file rel
// ("etc/passwd" or "etc/group"); an unreadable file gives an empty map.
func Names(root, rel string) map[int]string {
	out := map[int]string{}
	data, err := ReadFile(root, rel)
	if err != nil {
		return out
	}
	for _, e := range Entries(data) {
		if _, dup := out[int(e.ID)]; !dup {
			out[int(e.ID)] = e.Name
		}
	}
	return out
}

// ParseUserSpec checks the syntax of "user[:group]" (names or numbers).
func ParseUserSpec(spec string) (user, group string, err error) {
	user, group, hasGroup := strings.Cut(spec, ":")
	if user == "" || (hasGroup && group == "") || strings.ContainsAny(spec, " \t\n/") || strings.Count(spec, ":") > 1 {
		return "", "", fmt.Errorf("user %q must be user[:group], by name or number", spec)
	}
	return user, group, nil
}

// ResolveUser turns "user[:group]" into ids as the container sees them: a
// name is looked up in root's /etc/passwd (its primary group comes along),
// a group name in /etc/group; numbers are taken as they are.
func ResolveUser(root, spec string) (uid, gid uint32, err error) {
	user, group, err := ParseUserSpec(spec)
	if err != nil {
		return 0, 0, err
	}
	var users []Entry
	if data, err := ReadFile(root, "etc/passwd"); err == nil {
		users = Entries(data)
	}
	if n, err := strconv.ParseUint(user, 10, 32); err == nil {
		uid = uint32(n)
		for _, e := range users {
			if e.ID == uid {
				gid = e.GID
				break
			}
		}
	} else {
		found := false
		for _, e := range users {
			if e.Name == user {
				uid, gid, found = e.ID, e.GID, true
				break
			}
		}
		if !found && user != "root" {
			// root is uid 0 even in an image without a passwd file.
			return 0, 0, fmt.Errorf("user %q: %w", user, ErrNoSuchUser)
		}
	}
	if group == "" {
		return uid, gid, nil
	}
	if n, err := strconv.ParseUint(group, 10, 32); err == nil {
		return uid, uint32(n), nil
	}
	data, err := ReadFile(root, "etc/group")
	if err == nil {
		for _, e := range Entries(data) {
			if e.Name == group {
				return uid, e.ID, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("group %q: %w", group, ErrNoSuchUser)
}
