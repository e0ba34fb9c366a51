// Package quadlets keeps the engine's quadlet units: Podman's systemd-style
// unit files (.container, .pod, .volume, .network, .kube, .image, .build)
// with the files they reference. Each installed quadlet is a directory
// named after its unit file under the store's root, so one rename makes an
// install or a replacement visible at once. Units are validated and kept;
// turning them into engine objects (activation) is package quadletactivate's.
package quadlets

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/berth-project/berth/engine/internal/core"
)

const (
	// maxArchiveBytes bounds the file contents of one install.
	maxArchiveBytes = 64 << 20
	// maxArchiveFiles bounds the entries of one install.
	maxArchiveFiles = 1000
	stagingPrefix   = ".staging-"
	trashPrefix     = ".trash-"
)

// Store is the quadlet directory of one engine.
type Store struct {
	dir string
	mu  sync.Mutex
}

// Open opens (creating it) the quadlet directory dir and finishes what an
// interrupted install or removal left: staged files are dropped, a unit
// moved aside for replacement comes back when its successor is missing.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("quadlets: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("quadlets: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, stagingPrefix):
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("quadlets: dropping staged install: %w", err)
			}
		case strings.HasPrefix(name, trashPrefix):
			if err := recoverTrash(dir, name); err != nil {
				return nil, err
			}
		}
	}
	return &Store{dir: dir}, nil
}

// recoverTrash ends a replacement or removal cut short: ".trash-R-NAME"
// is the old NAME; it returns when nothing took its place, else it goes.
func recoverTrash(dir, trash string) error {
	rest := strings.TrimPrefix(trash, trashPrefix)
	_, name, ok := strings.Cut(rest, "-")
	full := filepath.Join(dir, trash)
	if ok && IsQuadletFile(name) && !strings.HasPrefix(rest, "rm") {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(full, filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("quadlets: restoring %s: %w", name, err)
			}
			return nil
		}
	}
	if err := os.RemoveAll(full); err != nil {
		return fmt.Errorf("quadlets: dropping %s: %w", trash, err)
	}
	return nil
}

// Dir is the quadlet directory.
func (s *Store) Dir() string { return s.dir }

// checkName refuses names that are not one quadlet file name.
func checkName(name string) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return core.InvalidArgument("name", fmt.Errorf("%q is not a quadlet file name", name))
	}
	if !IsQuadletFile(name) {
		return core.InvalidArgument("name", fmt.Errorf("%q is not a supported quadlet file type", filepath.Ext(name)))
	}
	return nil
}

// Install unpacks a tar archive holding exactly one quadlet unit and the
// files it references, validates the unit and makes it visible at once
// (staged, then renamed). A unit of that name is replaced only with replace.
func (s *Store) Install(ctx context.Context, archive io.Reader, opts core.QuadletInstallOptions) (core.QuadletInstallReport, error) {
	return s.InstallChecked(ctx, archive, opts, nil)
}

// InstallChecked is Install with one more check of the unit (its archive
// path and content) after validation and before it becomes visible; the
// check's error refuses the install.
func (s *Store) InstallChecked(_ context.Context, archive io.Reader, opts core.QuadletInstallOptions, check func(unitPath string, data []byte) error) (core.QuadletInstallReport, error) {
	staging, err := os.MkdirTemp(s.dir, stagingPrefix)
	if err != nil {
		return core.QuadletInstallReport{}, fmt.Errorf("quadlets: %w", err)
	}
	defer os.RemoveAll(staging)
	var files []string
	if opts.MultipartBoundary != "" {
		files, err = unpackMultipart(staging, multipart.NewReader(archive, opts.MultipartBoundary))
	} else {
		files, err = unpack(staging, archive)
	}
	if err != nil {
		return core.QuadletInstallReport{}, err
	}
	var units []string
	for _, f := range files {
		if IsQuadletFile(f) {
			units = append(units, f)
		}
	}
	switch {
	case len(files) == 0:
		return core.QuadletInstallReport{}, core.InvalidArgument("body", errors.New("no files found in request"))
	case len(units) == 0:
		return core.QuadletInstallReport{}, core.InvalidArgument("body", fmt.Errorf("no quadlet files found in request (%s): supported extensions are %s",
			strings.Join(files, ", "), strings.Join(extensions(), ", ")))
	case len(units) > 1:
		return core.QuadletInstallReport{}, core.InvalidArgument("body", fmt.Errorf("only a single quadlet file is allowed per request, got %s", strings.Join(units, ", ")))
	}
	unitPath := units[0]
	name := path.Base(unitPath)
	if err := checkName(name); err != nil {
		return core.QuadletInstallReport{}, err
	}
	data, err := os.ReadFile(filepath.Join(staging, filepath.FromSlash(unitPath)))
	if err != nil {
		return core.QuadletInstallReport{}, fmt.Errorf("quadlets: %w", err)
	}
	if errs := Validate(unitPath, data); len(errs) > 0 {
		return core.QuadletInstallReport{}, core.InvalidArgument("quadlet", joinUnitErrors(errs))
	}
	if check != nil {
		if err := check(unitPath, data); err != nil {
			return core.QuadletInstallReport{}, err
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	final := filepath.Join(s.dir, name)
	_, statErr := os.Lstat(final)
	exists := statErr == nil
	if exists && !opts.Replace {
		// Podman reports the file in QuadletErrors and answers 400 with
		// these words.
		return core.QuadletInstallReport{}, core.InvalidArgument("replace", fmt.Errorf("errors occurred installing some Quadlets: %s: a Quadlet with name %s already exists, refusing to overwrite", unitPath, name))
	}
	if err := syncDir(staging); err != nil {
		return core.QuadletInstallReport{}, err
	}
	if exists {
		trash := filepath.Join(s.dir, trashPrefix+randomTag()+"-"+name)
		if err := os.Rename(final, trash); err != nil {
			return core.QuadletInstallReport{}, fmt.Errorf("quadlets: %w", err)
		}
		defer os.RemoveAll(trash)
	}
	if err := os.Rename(staging, final); err != nil {
		return core.QuadletInstallReport{}, fmt.Errorf("quadlets: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return core.QuadletInstallReport{}, err
	}
	report := core.QuadletInstallReport{InstalledQuadlets: map[string]string{}, QuadletErrors: map[string]string{}}
	for _, f := range files {
		report.InstalledQuadlets[f] = filepath.Join(final, filepath.FromSlash(f))
	}
	return report, nil
}

// unpack writes the archive's regular files and directories under dir
// (through an os.Root, so nothing lands outside it) and returns the files'
// slash-separated paths. Entries that would leave dir, links and devices
// are refused.
func unpack(dir string, archive io.Reader) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("quadlets: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(archive)
	var files []string
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, core.InvalidArgument("body", fmt.Errorf("reading the tar archive: %w", err))
		}
		rel, err := entryPath(hdr.Name)
		if err != nil {
			return nil, err
		}
		if len(files) >= maxArchiveFiles {
			return nil, fmt.Errorf("more than %d files in one install: %w", maxArchiveFiles, core.ErrTooLarge)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if rel != "." {
				if err := root.MkdirAll(rel, 0o700); err != nil {
					return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q: %w", hdr.Name, err))
				}
			}
		case tar.TypeReg:
			total += hdr.Size
			if total > maxArchiveBytes {
				return nil, fmt.Errorf("quadlet files larger than %d bytes: %w", maxArchiveBytes, core.ErrTooLarge)
			}
			if err := writeEntry(root, rel, tr); err != nil {
				return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q: %w", hdr.Name, err))
			}
			files = append(files, rel)
		default:
			return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q: only regular files and directories can be installed", hdr.Name))
		}
	}
	sort.Strings(files)
	return files, nil
}

// unpackMultipart writes the parts of a multipart/form-data body that carry
// a file name under dir, each as a file of its base name (as Podman's
// install reads them; parts without a file name are skipped), and returns
// their names. The limits of a tar install apply.
func unpackMultipart(dir string, mr *multipart.Reader) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("quadlets: %w", err)
	}
	defer root.Close()
	var files []string
	var total int64
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, core.InvalidArgument("body", fmt.Errorf("reading the multipart body: %w", err))
		}
		name := part.FileName()
		if name == "" {
			part.Close()
			continue
		}
		if name == "." || name == ".." || name == "/" || strings.HasPrefix(name, stagingPrefix) || strings.HasPrefix(name, trashPrefix) {
			part.Close()
			return nil, core.InvalidArgument("body", fmt.Errorf("multipart file name %q is not a file name", part.FileName()))
		}
		if len(files) >= maxArchiveFiles {
			part.Close()
			return nil, fmt.Errorf("more than %d files in one install: %w", maxArchiveFiles, core.ErrTooLarge)
		}
		// One byte past the budget tells a part that exceeds it.
		lr := &io.LimitedReader{R: part, N: maxArchiveBytes - total + 1}
		err = writeEntry(root, name, lr)
		part.Close()
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, core.InvalidArgument("body", fmt.Errorf("file %q is sent twice", name))
			}
			return nil, core.InvalidArgument("body", fmt.Errorf("multipart file %q: %w", name, err))
		}
		total = maxArchiveBytes + 1 - lr.N
		if total > maxArchiveBytes {
			return nil, fmt.Errorf("quadlet files larger than %d bytes: %w", maxArchiveBytes, core.ErrTooLarge)
		}
		files = append(files, name)
	}
	sort.Strings(files)
	return files, nil
}

// entryPath cleans a tar entry name and refuses one that leaves the
// quadlet directory.
func entryPath(name string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", core.InvalidArgument("body", fmt.Errorf("tar entry %q escapes the quadlet directory", name))
	}
	for _, part := range strings.Split(clean, "/") {
		if strings.HasPrefix(part, stagingPrefix) || strings.HasPrefix(part, trashPrefix) {
			return "", core.InvalidArgument("body", fmt.Errorf("tar entry %q: names starting with %q or %q are reserved", name, stagingPrefix, trashPrefix))
		}
	}
	return clean, nil
}

func writeEntry(root *os.Root, rel string, r io.Reader) error {
	if parent := path.Dir(rel); parent != "." {
		if err := root.MkdirAll(parent, 0o700); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir flushes a directory's entries, so a rename survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("quadlets: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("quadlets: %w", err)
	}
	return nil
}

func randomTag() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func extensions() []string {
	var exts []string
	for ext := range sectionOf {
		exts = append(exts, ext)
	}
	sort.Strings(exts)
	return exts
}

func joinUnitErrors(errs []*UnitError) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// unitPath finds the unit file of the installed quadlet name.
func (s *Store) unitPath(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	appDir := filepath.Join(s.dir, name)
	var found string
	err := filepath.WalkDir(appDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if found == "" && !d.IsDir() && d.Name() == name {
			found = p
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) || (err == nil && found == "") {
		return "", fmt.Errorf("no such quadlet: %s: %w", name, core.ErrNoSuchQuadlet)
	}
	if err != nil {
		return "", fmt.Errorf("quadlets: %w", err)
	}
	return found, nil
}

// Print answers the unit file of quadlet name as installed.
func (s *Store) Print(_ context.Context, name string) (string, error) {
	p, err := s.unitPath(name)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("quadlets: %w", err)
	}
	return string(data), nil
}

// Exists reports (nil) whether quadlet name is installed.
func (s *Store) Exists(_ context.Context, name string) error {
	_, err := s.unitPath(name)
	return err
}

// List answers the installed quadlets that pass filters (name, status,
// pod: regular expressions, as Podman matches them).
func (s *Store) List(_ context.Context, filters map[string][]string) ([]core.QuadletListEntry, error) {
	return s.list(filters, nil)
}

// ListStatus is List with each quadlet's Status answered by status (a
// quadlet it answers "" for keeps "Not loaded"); the status filter
// applies to those answers.
func (s *Store) ListStatus(filters map[string][]string, status func(name string) string) ([]core.QuadletListEntry, error) {
	return s.list(filters, status)
}

// UnitFile answers the path of the unit file of installed quadlet name.
func (s *Store) UnitFile(name string) (string, error) { return s.unitPath(name) }

func (s *Store) list(filters map[string][]string, status func(string) string) ([]core.QuadletListEntry, error) {
	matchers := map[string][]*regexp.Regexp{}
	for key, values := range filters {
		switch key {
		case "name", "status", "pod":
		default:
			return nil, core.InvalidArgument("filters", fmt.Errorf("%s is not a valid filter", key))
		}
		for _, v := range values {
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, core.InvalidArgument("filters", fmt.Errorf("%s=%s: %w", key, v, err))
			}
			matchers[key] = append(matchers[key], re)
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("quadlets: %w", err)
	}
	list := []core.QuadletListEntry{}
	for _, e := range entries {
		if !e.IsDir() || !IsQuadletFile(e.Name()) {
			continue
		}
		q, err := s.describe(e.Name())
		if errors.Is(err, core.ErrNoSuchQuadlet) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if status != nil {
			if st := status(q.Name); st != "" {
				q.Status = st
			}
		}
		fields := map[string]string{"name": q.Name, "status": q.Status, "pod": q.Pod}
		keep := true
		for key, res := range matchers {
			if !slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(fields[key]) }) {
				keep = false
			}
		}
		if keep {
			list = append(list, q)
		}
	}
	return list, nil
}

// describe builds the list entry of installed quadlet name.
func (s *Store) describe(name string) (core.QuadletListEntry, error) {
	p, err := s.unitPath(name)
	if err != nil {
		return core.QuadletListEntry{}, err
	}
	q := core.QuadletListEntry{Name: name, Path: p, Status: "Not loaded"}
	data, err := os.ReadFile(p)
	if err != nil {
		return core.QuadletListEntry{}, fmt.Errorf("quadlets: %w", err)
	}
	_, entries := scanEntries(data)
	kind := sectionOf[filepath.Ext(name)]
	serviceName := ""
	for _, e := range entries {
		if e.section != kind {
			continue
		}
		switch e.key {
		case "ServiceName":
			serviceName = e.value
		case "Pod":
			q.Pod = e.value
		}
	}
	q.UnitName = ServiceName(name, serviceName)
	files := 0
	_ = filepath.WalkDir(filepath.Join(s.dir, name), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return nil
	})
	if files > 1 {
		q.App = name
	}
	return q, nil
}

// ServiceName is the systemd service Podman's generator makes of quadlet
// name, or override (the unit's ServiceName key) when set.
func ServiceName(name, override string) string {
	if override != "" {
		return override + ".service"
	}
	ext := filepath.Ext(name)
	base := strings.TrimSuffix(name, ext)
	switch ext {
	case ".container", ".kube":
		return base + ".service"
	default:
		return base + "-" + strings.TrimPrefix(ext, ".") + ".service"
	}
}

// Remove removes the named quadlets (every one with all) and the files
// installed with them. A missing quadlet is an error in the report unless
// ignore. Whether a quadlet may go (force for an active one) is decided
// by the caller that activates units; the store only deletes files.
func (s *Store) Remove(ctx context.Context, names []string, opts core.QuadletRemoveOptions) (core.QuadletRemoveReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if opts.All {
		list, err := s.list(nil, nil)
		if err != nil {
			return core.QuadletRemoveReport{}, err
		}
		names = names[:0]
		for _, q := range list {
			names = append(names, q.Name)
		}
	}
	report := core.QuadletRemoveReport{Removed: []string{}, Errors: map[string]string{}, Causes: map[string]error{}}
	fail := func(name string, err error) {
		report.Errors[name] = err.Error()
		report.Causes[name] = err
	}
	for _, name := range names {
		if _, err := s.unitPath(name); err != nil {
			if errors.Is(err, core.ErrNoSuchQuadlet) && opts.Ignore {
				// Podman's report lists an ignored name as removed.
				report.Removed = append(report.Removed, name)
				continue
			}
			fail(name, err)
			continue
		}
		trash := filepath.Join(s.dir, trashPrefix+"rm"+randomTag()+"-"+name)
		if err := os.Rename(filepath.Join(s.dir, name), trash); err != nil {
			fail(name, fmt.Errorf("quadlets: %w", err))
			continue
		}
		if err := os.RemoveAll(trash); err != nil {
			fail(name, fmt.Errorf("quadlets: %w", err))
			continue
		}
		report.Removed = append(report.Removed, name)
	}
	if err := syncDir(s.dir); err != nil {
		return report, err
	}
	return report, nil
}
