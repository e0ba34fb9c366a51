package containers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// /etc/passwd and /etc/group entries the engine adds, as Podman does with
// its --passwd (manage_password, on unless the request turns it off;
// Docker's API turns it off, as dockerd adds nothing):
//   - a container run as a numeric UID its image's /etc/passwd lacks gets
//     "UID:*:UID:GID:container user:WORKDIR:/bin/sh" (passwd_entry, a
//     template of $USERNAME, $UID, $GID, $NAME and $HOME, replaces it), and
//     for its numeric group (the UID when it names none) that /etc/group
//     lacks, "GID:x:GID:USER" (group_entry: $GROUPNAME, $GID, $USERLIST);
//   - each host user named by hostusers (podman's --hostuser) that the
//     image lacks gets its host entry, home its own where it is mounted
//     into the container, else the working directory.
//
// The entries are appended to the container's files in its root (once:
// the next start finds them), or, for a read-only root, written with the
// image's lines to STATICDIR/passwd and STATICDIR/group and bound over
// them. A mount of the request's at /etc/passwd or /etc/group is left
// alone. The root is opened as an os.Root: an image's link cannot point the
// write outside it.

// checkPasswdRequest refuses, at create, templates that would write more
// than one line and host users the host does not have.
func checkPasswdRequest(s *core.ContainerSpec) error {
	if strings.ContainsAny(s.PasswdEntry, "\n\r") {
		return core.InvalidArgument("passwd_entry", errors.New("the entry is one line"))
	}
	if strings.ContainsAny(s.GroupEntry, "\n\r") {
		return core.InvalidArgument("group_entry", errors.New("the entry is one line"))
	}
	for _, name := range s.HostUsers {
		if _, err := lookupHostUser(name); err != nil {
			return core.InvalidArgument("hostusers", err)
		}
	}
	return nil
}

// managesPasswd reports whether the engine adds entries for the container.
func managesPasswd(s *core.ContainerSpec) bool {
	return s.ManagePassword == nil || *s.ManagePassword
}

// lookupHostUser finds a host user by name or UID.
func lookupHostUser(name string) (*user.User, error) {
	if _, err := strconv.Atoi(name); err == nil {
		if u, err := user.LookupId(name); err == nil {
			return u, nil
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("host user %q: %w", name, err)
	}
	return u, nil
}

// idFile is the parsed part of an /etc/passwd or /etc/group file: its
// names and numeric IDs.
type idFile struct {
	data       []byte
	names, ids map[string]bool
}

func readIDFile(root *os.Root, name string) (*idFile, error) {
	data, err := root.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f := &idFile{data: data, names: map[string]bool{}, ids: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		f.names[fields[0]] = true
		f.ids[fields[2]] = true
	}
	return f, nil
}

func (f *idFile) has(nameOrID string) bool { return f.names[nameOrID] || f.ids[nameOrID] }

// mountedAt reports whether dir is a mount destination of the request or
// below one.
func mountedAt(s *core.ContainerSpec, vols []mountedVolume, dir string) bool {
	var dests []string
	for _, m := range s.Mounts {
		dests = append(dests, m.Destination)
	}
	for _, v := range vols {
		dests = append(dests, v.Dest)
	}
	for _, d := range dests {
		d = path.Clean(d)
		if d == dir || strings.HasPrefix(dir, d+"/") {
			return true
		}
	}
	return false
}

// workingDir is the container's working directory as its process sees it.
func workingDir(rec *record) string {
	if rec.Spec.WorkDir != "" {
		return rec.Spec.WorkDir
	}
	if rec.ImageWorkDir != "" {
		return rec.ImageWorkDir
	}
	return "/"
}

// passwdEntries works out the lines to add to the container's /etc/passwd
// and /etc/group.
func passwdEntries(rec *record, passwd, group *idFile) (string, string, error) {
	var pw, gr strings.Builder
	home := workingDir(rec)
	for _, name := range rec.Spec.HostUsers {
		u, err := lookupHostUser(name)
		if err != nil {
			return "", "", core.InvalidArgument("hostusers", err)
		}
		if passwd.has(u.Username) || passwd.has(u.Uid) {
			continue
		}
		dir := home
		if mountedAt(&rec.Spec, rec.Volumes, path.Clean(u.HomeDir)) {
			dir = u.HomeDir
		}
		pw.WriteString(passwdLine(rec.Spec.PasswdEntry, u.Username, u.Uid, u.Gid, u.Name, dir))
		passwd.names[u.Username], passwd.ids[u.Uid] = true, true
	}
	userPart, groupPart, hasGroup := strings.Cut(rec.Spec.User, ":")
	if _, err := strconv.ParseUint(userPart, 10, 32); err != nil || rec.Spec.User == "" {
		return pw.String(), gr.String(), nil
	}
	gid := "0"
	if hasGroup {
		if _, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			gid = groupPart
		} else if id, ok := group.idOf(groupPart); ok {
			gid = id
		} else {
			return "", "", core.InvalidArgument("user", fmt.Errorf("group %q is not in the image's /etc/group", groupPart))
		}
	}
	if !passwd.has(userPart) {
		pw.WriteString(passwdLine(rec.Spec.PasswdEntry, userPart, userPart, gid, "container user", home))
	}
	groupName := userPart
	if hasGroup {
		groupName = groupPart
	}
	if _, err := strconv.ParseUint(groupName, 10, 32); err == nil && !group.has(groupName) {
		gr.WriteString(groupLine(rec.Spec.GroupEntry, groupName, groupName, userPart))
	}
	return pw.String(), gr.String(), nil
}

// idOf returns the numeric ID of a name in the file.
func (f *idFile) idOf(name string) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(f.data))
	for sc.Scan() {
		if fields := strings.Split(sc.Text(), ":"); len(fields) >= 3 && fields[0] == name {
			return fields[2], true
		}
	}
	return "", false
}

func passwdLine(template, username, uid, gid, name, home string) string {
	if template == "" {
		return fmt.Sprintf("%s:*:%s:%s:%s:%s:/bin/sh\n", username, uid, gid, name, home)
	}
	return strings.NewReplacer("$USERNAME", username, "$UID", uid, "$GID", gid, "$NAME", name, "$HOME", home).Replace(template) + "\n"
}

func groupLine(template, groupname, gid, users string) string {
	if template == "" {
		return fmt.Sprintf("%s:x:%s:%s\n", groupname, gid, users)
	}
	return strings.NewReplacer("$GROUPNAME", groupname, "$GID", gid, "$USERLIST", users).Replace(template) + "\n"
}

// addPasswdEntries adds the entries to the container's root, or for a
// read-only root returns the bind mounts of its own copies.
func addPasswdEntries(rec *record) ([]specs.Mount, error) {
	if !managesPasswd(&rec.Spec) || (rec.Spec.User == "" && len(rec.Spec.HostUsers) == 0) || rec.Rootfs == "" {
		return nil, nil
	}
	var out []specs.Mount
	files := map[string]bool{"passwd": !mountedAt(&rec.Spec, nil, "/etc/passwd"), "group": !mountedAt(&rec.Spec, nil, "/etc/group")}
	if rec.Spec.ReadOnly {
		// Made once: the next start binds the same copies.
		for name, wanted := range files {
			if _, err := os.Stat(filepath.Join(rec.StaticDir, name)); wanted && err == nil {
				files[name] = false
				out = append(out, etcBind(rec, name))
			}
		}
	}
	if !files["passwd"] && !files["group"] {
		return out, nil
	}
	root, err := os.OpenRoot(rec.Rootfs)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	passwd, err := readIDFile(root, "etc/passwd")
	if err != nil {
		return nil, fmt.Errorf("read the container's /etc/passwd: %w", err)
	}
	group, err := readIDFile(root, "etc/group")
	if err != nil {
		return nil, fmt.Errorf("read the container's /etc/group: %w", err)
	}
	pw, gr, err := passwdEntries(rec, passwd, group)
	if err != nil {
		return nil, err
	}
	for name, add := range map[string]string{"passwd": pw, "group": gr} {
		if !files[name] || add == "" {
			continue
		}
		orig := passwd.data
		if name == "group" {
			orig = group.data
		}
		if rec.Spec.ReadOnly {
			if len(orig) > 0 && orig[len(orig)-1] != '\n' {
				orig = append(orig, '\n')
			}
			copyPath := filepath.Join(rec.StaticDir, name)
			if err := os.MkdirAll(rec.StaticDir, 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(copyPath, append(append([]byte(nil), orig...), add...), 0o644); err != nil {
				return nil, err
			}
			out = append(out, etcBind(rec, name))
			continue
		}
		if len(orig) > 0 && orig[len(orig)-1] != '\n' {
			add = "\n" + add
		}
		if err := root.MkdirAll("etc", 0o755); err != nil {
			return nil, err
		}
		f, err := root.OpenFile("etc/"+name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("add to the container's /etc/%s: %w", name, err)
		}
		_, err = f.WriteString(add)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("add to the container's /etc/%s: %w", name, err)
		}
	}
	return out, nil
}

// etcBind binds STATICDIR/NAME at /etc/NAME.
func etcBind(rec *record, name string) specs.Mount {
	return specs.Mount{Destination: "/etc/" + name, Type: "bind", Source: filepath.Join(rec.StaticDir, name), Options: []string{"bind", "rprivate"}}
}
