package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/containers/storage"
	"github.com/containers/storage/pkg/archive"
	"github.com/containers/storage/pkg/chrootarchive"
	"github.com/containers/storage/pkg/idtools"
	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
)

// copySource is a tree COPY and ADD read from: the context, or the rootfs
// of a stage or image (mounted read-only for the step).
type copySource struct {
	root string
	// context is true for the build context (ignore rules and the
	// extraction's checksums apply).
	context bool
	// id names a stage's or image's content (or a download's or clone's)
	// for cache keys.
	id string
	// fromImage is true for a stage's or image's rootfs, whose owners
	// COPY --from keeps.
	fromImage bool
	// files is the tree the sources are looked up in (nil: the disk).
	files   tree
	release func()
}

// contextSource is the context as its index describes it (for cache
// keys); onDisk gives the extracted files to copy.
func (j *job) contextSource() *copySource {
	return &copySource{root: j.bc.dir, context: true, files: j.bc.files(), release: func() {}}
}

// onDisk is the source read from the disk (the context once extracted).
func (s *copySource) onDisk() *copySource {
	out := *s
	out.files = nil
	return &out
}

// tree is where the source's paths are looked up.
func (s *copySource) tree() tree {
	if s.files == nil {
		return diskTree{}
	}
	return s.files
}

// fromSource mounts the final state of a stage, or an image, named by ref.
func (j *job) fromSource(ctx context.Context, ref string) (*copySource, error) {
	var st *imageState
	for i := range j.stages {
		if _, built := j.results[i]; built && stageIndex(j.stages, len(j.stages), ref) == i {
			st = j.results[i]
		}
	}
	if st == nil {
		img, err := j.image(ctx, ref)
		if err != nil {
			return nil, err
		}
		st = img
	}
	if st.topLayer == "" {
		dir, err := os.MkdirTemp(j.b.bundleDir(), tmpPrefix+"empty-")
		if err != nil {
			return nil, err
		}
		return &copySource{root: dir, id: st.cacheKey, fromImage: true, release: func() { os.RemoveAll(dir) }}, nil
	}
	store := j.b.o.Store.Storage()
	root, err := store.Mount(st.topLayer, "")
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", ref, err)
	}
	layer := st.topLayer
	return &copySource{root: root, id: st.cacheKey, fromImage: true, release: func() { _, _ = store.Unmount(layer, false) }}, nil
}

// match is one source path a COPY resolved.
type match struct {
	// rel is the path relative to the source root as the instruction
	// named it (slash separated); abs is where it is, symlinks resolved
	// inside the root.
	rel, abs string
	info     fs.FileInfo
}

// hasMeta tells whether a source is a glob.
func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// resolveSources finds the paths COPY names. Sources are always inside the
// root: ".." cannot climb out of it and symlinks resolve within it.
func (j *job) resolveSources(src *copySource, sources []string) ([]match, error) {
	var out []match
	for _, s := range sources {
		rel := strings.TrimPrefix(path.Clean("/"+s), "/")
		if rel == "" {
			rel = "."
		}
		if !hasMeta(rel) {
			m, err := j.resolveOne(src, rel)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			continue
		}
		var found []match
		err := src.tree().walkDir(src.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			r, _ := filepath.Rel(src.root, p)
			r = filepath.ToSlash(r)
			if r == "." {
				return nil
			}
			ok, merr := path.Match(rel, r)
			if merr != nil {
				return fmt.Errorf("bad pattern %q: %w", s, merr)
			}
			if ok && !(src.context && j.ex.excluded(r)) {
				m, err := j.resolveOne(src, r)
				if err != nil {
					return err
				}
				found = append(found, m)
			}
			if d.IsDir() && strings.Count(r, "/") >= strings.Count(rel, "/") {
				return filepath.SkipDir
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("no source files were specified: %q matches nothing", s)
		}
		out = append(out, found...)
	}
	return out, nil
}

func (j *job) resolveOne(src *copySource, rel string) (match, error) {
	if src.context && j.ex.excluded(rel) {
		return match{}, fmt.Errorf("%q is excluded from the build context", rel)
	}
	abs, err := securejoin.SecureJoinVFS(src.root, rel, src.tree())
	if err != nil {
		return match{}, err
	}
	if src.context {
		if r, err := filepath.Rel(src.root, abs); err == nil && j.ex.excluded(filepath.ToSlash(r)) {
			return match{}, fmt.Errorf("%q resolves to a path excluded from the build context", rel)
		}
	}
	fi, err := src.tree().Lstat(abs)
	if err != nil {
		return match{}, fmt.Errorf("checking on sources under %q: %w", rel, errors.Unwrap(err))
	}
	return match{rel: rel, abs: abs, info: fi}, nil
}

// sourceDigest identifies the content of sources for the cache: names,
// modes, link targets and file contents (hashed once per build).
func (j *job) sourceDigest(src *copySource, sources []string) (string, error) {
	if !src.context {
		return src.id + " " + strings.Join(sources, " "), nil
	}
	matches, err := j.resolveSources(src, sources)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range matches {
		fmt.Fprintf(h, "%s\x00", m.rel)
		err := j.walkSource(src, m, func(rel, abs string, fi fs.FileInfo) error {
			fmt.Fprintf(h, "%s\x00%o\x00", rel, fi.Mode())
			switch {
			case fi.Mode().IsRegular():
				sum, err := fileSum(src.tree(), abs)
				if err != nil {
					return err
				}
				h.Write(sum[:])
			case fi.Mode()&fs.ModeSymlink != 0:
				target, err := src.tree().Readlink(abs)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "%s\x00", target)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fileSum is a file's SHA-256: from the context's index, else read.
func fileSum(t tree, abs string) ([sha256.Size]byte, error) {
	if sum, ok := t.sum(abs); ok {
		return sum, nil
	}
	var sum [sha256.Size]byte
	f, err := os.Open(abs)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// walkSource visits a matched source and, for a directory, everything
// under it (symlinks are not followed; ignored paths are skipped). rel is
// relative to the match.
func (j *job) walkSource(src *copySource, m match, visit func(rel, abs string, fi fs.FileInfo) error) error {
	if !m.info.IsDir() {
		return visit(".", m.abs, m.info)
	}
	ctxRel := ""
	if src.context {
		r, err := filepath.Rel(src.root, m.abs)
		if err != nil {
			return err
		}
		ctxRel = filepath.ToSlash(r)
	}
	return src.tree().walkDir(m.abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(m.abs, p)
		r = filepath.ToSlash(r)
		if src.context && r != "." && j.ex.excluded(path.Join(ctxRel, r)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return visit(r, p, fi)
	})
}

// copyOwner is the owner and mode COPY gives what it writes.
type copyOwner struct {
	uid, gid int
	// keep keeps each source file's owner (COPY --from without --chown).
	keep bool
	mode *os.FileMode
}

// ownerOf is who owns a copied file.
func (o copyOwner) ownerOf(fi fs.FileInfo) (int, int) {
	if o.keep {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return int(st.Uid), int(st.Gid)
		}
	}
	return o.uid, o.gid
}

// parseOwner resolves --chown and --chmod against the destination rootfs.
func parseOwner(rootfs, chown, chmod string) (copyOwner, error) {
	var o copyOwner
	if chown != "" {
		userPart, _, hasGroup := strings.Cut(chown, ":")
		eu, err := oci.ResolveUser(rootfs, chown, nil)
		if err != nil {
			return o, fmt.Errorf("--chown=%s: %w", chown, err)
		}
		o.uid, o.gid = eu.Uid, eu.Gid
		if !hasGroup {
			// A user without a group keeps the user's numeric ID as group
			// when it is a number, else the user's primary group.
			if n, err := strconv.Atoi(userPart); err == nil {
				o.gid = n
			}
		}
	}
	if chmod != "" {
		n, err := strconv.ParseUint(chmod, 8, 32)
		if err != nil || n > 0o7777 {
			return o, fmt.Errorf("--chmod=%s is not an octal mode", chmod)
		}
		mode := os.FileMode(n & 0o777)
		if n&0o4000 != 0 {
			mode |= os.ModeSetuid
		}
		if n&0o2000 != 0 {
			mode |= os.ModeSetgid
		}
		if n&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		o.mode = &mode
	}
	return o, nil
}

// copyStep runs COPY.
func (j *job) copyStep(ctx context.Context, st *imageState, sc *stageContext, c *instructions.CopyCommand, key string) error {
	if c.Link || c.Parents || len(c.ExcludePatterns) > 0 {
		return errors.New("COPY --link, --parents and --exclude are not supported")
	}
	src := j.contextSource()
	if c.From != "" {
		var err error
		if src, err = j.fromSource(ctx, c.From); err != nil {
			return err
		}
	}
	defer src.release()
	return j.copyLike(ctx, st, sc, src, c.SourcesAndDest, c.Chown, c.Chmod, false, key, "COPY")
}

// addStep runs ADD: COPY from the context that also unpacks local
// archives, downloads http(s) URLs (never unpacked) and clones git
// repositories.
func (j *job) addStep(ctx context.Context, st *imageState, sc *stageContext, c *instructions.AddCommand, key string) error {
	if c.Link || len(c.ExcludePatterns) > 0 || c.Unpack != nil {
		return errors.New("ADD --link, --exclude and --unpack are not supported")
	}
	var local []string
	var remote []*fetched
	defer func() {
		for _, f := range remote {
			f.src.release()
		}
	}()
	for _, s := range c.SourcePaths {
		kind, err := sourceKind(s)
		if err != nil {
			return err
		}
		switch {
		case kind == localSource && c.Checksum != "":
			return errors.New("ADD --checksum is only supported for URL sources")
		case kind == gitSource && c.Checksum != "":
			return errors.New("ADD --checksum is not supported for git repositories")
		case kind != gitSource && c.KeepGitDir:
			return errors.New("ADD --keep-git-dir is only supported for git repositories")
		case kind == localSource:
			local = append(local, s)
			continue
		}
		f, err := j.fetchRemote(ctx, kind, s, c.Checksum, c.KeepGitDir)
		if err != nil {
			return err
		}
		remote = append(remote, f)
	}
	if len(remote) == 0 {
		return j.copyLike(ctx, st, sc, j.contextSource(), c.SourcesAndDest, c.Chown, c.Chmod, true, key, "ADD")
	}
	// Several sources always go into a directory, whatever their kind.
	dest := c.DestPath
	if len(c.SourcePaths)+len(c.SourceContents) > 1 && !strings.HasSuffix(dest, "/") {
		dest += "/"
	}
	parts := []copyPart{{src: j.contextSource(), sd: instructions.SourcesAndDest{DestPath: dest, SourcePaths: local, SourceContents: c.SourceContents}, unpack: true}}
	for _, f := range remote {
		parts = append(parts, copyPart{src: f.src, sd: instructions.SourcesAndDest{DestPath: dest, SourcePaths: []string{f.name}}})
	}
	return j.copyParts(ctx, st, sc, parts, c.Chown, c.Chmod, key, "ADD", c.DestPath)
}

// copyPart is one group of sources of a COPY or ADD that read from the
// same tree.
type copyPart struct {
	src    *copySource
	sd     instructions.SourcesAndDest
	unpack bool
}

// copyLike is COPY and ADD of one tree: the cache key covers the sources'
// content, the files land in a new layer.
func (j *job) copyLike(ctx context.Context, st *imageState, sc *stageContext, src *copySource, sd instructions.SourcesAndDest, chown, chmod string, unpack bool, key, verb string) error {
	return j.copyParts(ctx, st, sc, []copyPart{{src: src, sd: sd, unpack: unpack}}, chown, chmod, key, verb, sd.DestPath)
}

// copyParts copies groups of sources in one step.
func (j *job) copyParts(ctx context.Context, st *imageState, sc *stageContext, parts []copyPart, chown, chmod, key, verb, dest string) error {
	var sums []string
	for _, p := range parts {
		if len(p.sd.SourcePaths) == 0 {
			continue
		}
		sum, err := j.sourceDigest(p.src, p.sd.SourcePaths)
		if err != nil {
			return err
		}
		sums = append(sums, sum)
	}
	sum := strings.Join(sums, " ")
	if len(sums) > 1 {
		sum = chainKey("", sums...)
	}
	key = chainKey(key, sum)
	createdBy := fmt.Sprintf("/bin/sh -c #(nop) %s %s in %s", verb, shortSum(sum), dest)
	return j.finishStep(ctx, st, sc, key, func() (io.Reader, func(), error) {
		return j.changes(st.topLayer, func(rootfs string) error {
			owner, err := parseOwner(rootfs, chown, chmod)
			if err != nil {
				return err
			}
			for _, p := range parts {
				if len(p.sd.SourcePaths) == 0 && len(p.sd.SourceContents) == 0 {
					continue
				}
				o := owner
				o.keep = chown == "" && !p.src.context && p.src.fromImage
				if err := j.copyInto(rootfs, st.config.WorkingDir, p.src.onDisk(), p.sd, o, p.unpack); err != nil {
					return err
				}
			}
			return nil
		})
	}, createdBy, false)
}

func shortSum(sum string) string {
	if sum == "" {
		return "heredoc"
	}
	if len(sum) > 64 {
		sum = sum[:64]
	}
	return "multi:" + sum
}

// copyInto copies the sources into rootfs at the destination.
func (j *job) copyInto(rootfs, workdir string, src *copySource, sd instructions.SourcesAndDest, owner copyOwner, unpack bool) error {
	dest := sd.DestPath
	if dest == "" {
		return errors.New("a destination is required")
	}
	destAbs := absTarget(dest, workdir)
	matches, err := j.resolveSources(src, sd.SourcePaths)
	if err != nil {
		return err
	}
	destIsDir := strings.HasSuffix(dest, "/") || dest == "." || len(matches)+len(sd.SourceContents) > 1
	for _, s := range sd.SourcePaths {
		if hasMeta(s) {
			destIsDir = true
		}
	}
	if p, err := securejoin.SecureJoin(rootfs, destAbs); err == nil {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			destIsDir = true
		}
	}
	mkdirs := func(dir string) (string, error) {
		p, err := securejoin.SecureJoin(rootfs, dir)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			if err := securejoin.MkdirAll(rootfs, dir, 0o755); err != nil {
				return "", err
			}
			if err := os.Lchown(p, owner.uid, owner.gid); err != nil {
				return "", err
			}
		}
		return securejoin.SecureJoin(rootfs, dir)
	}
	for _, content := range sd.SourceContents {
		dir := destAbs
		name := path.Base(content.Path)
		if !destIsDir {
			dir, name = path.Dir(destAbs), path.Base(destAbs)
		}
		dirPath, err := mkdirs(dir)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if owner.mode != nil {
			mode = *owner.mode
		}
		if err := writeInto(dirPath, name, strings.NewReader(content.Data), mode, owner); err != nil {
			return err
		}
	}
	for _, m := range matches {
		if unpack && m.info.Mode().IsRegular() {
			done, err := j.unpackArchive(rootfs, destAbs, m, owner, mkdirs)
			if err != nil {
				return err
			}
			if done {
				continue
			}
		}
		if !m.info.IsDir() && !destIsDir {
			dirPath, err := mkdirs(path.Dir(destAbs))
			if err != nil {
				return err
			}
			if err := copyEntry(m.abs, m.info, dirPath, path.Base(destAbs), owner); err != nil {
				return err
			}
			continue
		}
		base := destAbs
		if _, err := mkdirs(base); err != nil {
			return err
		}
		if !m.info.IsDir() {
			dirPath, err := securejoin.SecureJoin(rootfs, base)
			if err != nil {
				return err
			}
			if err := copyEntry(m.abs, m.info, dirPath, path.Base(m.rel), owner); err != nil {
				return err
			}
			continue
		}
		err := j.walkSource(src, m, func(rel, abs string, fi fs.FileInfo) error {
			if rel == "." {
				return nil
			}
			target := path.Join(base, rel)
			dirPath, err := securejoin.SecureJoin(rootfs, path.Dir(target))
			if err != nil {
				return err
			}
			return copyEntry(abs, fi, dirPath, path.Base(target), owner)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// copyEntry copies one file, directory (not its content) or symlink into
// dir under name, with the owner and (for files and directories) mode.
func copyEntry(abs string, fi fs.FileInfo, dir, name string, owner copyOwner) error {
	target := filepath.Join(dir, name)
	mode := fi.Mode()
	if owner.mode != nil && (mode.IsRegular() || mode.IsDir()) {
		mode = *owner.mode | mode&fs.ModeDir
	}
	switch {
	case fi.IsDir():
		if existing, err := os.Lstat(target); err == nil && !existing.IsDir() {
			if err := os.Remove(target); err != nil {
				return err
			}
		}
		if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := os.Chmod(target, mode.Perm()|mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		link, err := os.Readlink(abs)
		if err != nil {
			return err
		}
		_ = os.RemoveAll(target)
		if err := os.Symlink(link, target); err != nil {
			return err
		}
	case fi.Mode().IsRegular():
		f, err := os.Open(abs)
		if err != nil {
			return err
		}
		err = writeInto(dir, name, f, mode, copyOwner{})
		f.Close()
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: only files, directories and symlinks can be copied", name)
	}
	uid, gid := owner.ownerOf(fi)
	if err := os.Lchown(target, uid, gid); err != nil {
		return err
	}
	mtime := fi.ModTime()
	ts := []unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// writeInto writes r as dir/name (replacing what is there, never following
// a symlink at name).
func writeInto(dir, name string, r io.Reader, mode os.FileMode, owner copyOwner) error {
	target := filepath.Join(dir, name)
	if fi, err := os.Lstat(target); err == nil && (fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0) {
		if err := os.RemoveAll(target); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Lchown(target, owner.uid, owner.gid); err != nil {
		return err
	}
	return os.Chmod(target, mode.Perm()|mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

// unpackArchive extracts a local tar archive (plain or compressed) for
// ADD; it reports false when the file is not an archive. Extraction runs
// chrooted in the destination, so entries cannot leave it.
func (j *job) unpackArchive(rootfs, destAbs string, m match, owner copyOwner, mkdirs func(string) (string, error)) (bool, error) {
	f, err := os.Open(m.abs)
	if err != nil {
		return false, err
	}
	defer f.Close()
	dec, err := archive.DecompressStream(f)
	if err != nil {
		return false, nil
	}
	_, terr := tar.NewReader(dec).Next()
	dec.Close()
	if terr != nil {
		return false, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	dir, err := mkdirs(destAbs)
	if err != nil {
		return false, err
	}
	opts := &archive.TarOptions{}
	if owner.uid != 0 || owner.gid != 0 {
		opts.ChownOpts = &idtools.IDPair{UID: owner.uid, GID: owner.gid}
	}
	if err := chrootarchive.Untar(f, dir, opts); err != nil {
		return false, fmt.Errorf("unpacking %s: %w", m.rel, err)
	}
	return true, nil
}

// changes runs apply on a mounted working layer on parent and returns what
// it changed as an uncompressed tar (a spooled file, removed by the
// returned function). The working layer is always unmounted and removed,
// also when apply fails.
func (j *job) changes(parent string, apply func(rootfs string) error) (_ io.Reader, _ func(), err error) {
	store := j.b.o.Store.Storage()
	work, err := store.CreateLayer("", parent, nil, "", true, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a working layer: %w", err)
	}
	defer func() {
		if derr := store.DeleteLayer(work.ID); derr != nil && !errors.Is(derr, storage.ErrLayerUnknown) {
			j.b.o.Logger.Warn("removing a build's working layer", "layer", work.ID, "err", derr)
		}
	}()
	root, err := store.Mount(work.ID, "")
	if err != nil {
		return nil, nil, fmt.Errorf("mounting a working layer: %w", err)
	}
	applyErr := apply(root)
	if _, err := store.Unmount(work.ID, true); err != nil && applyErr == nil {
		applyErr = err
	}
	if applyErr != nil {
		return nil, nil, applyErr
	}
	// The diff reader holds the layer store's lock until it is closed, so
	// the changes are spooled to a file before the new layer is stored.
	spool, err := os.CreateTemp(j.b.tmpDir(), tmpPrefix+"diff-")
	if err != nil {
		return nil, nil, err
	}
	release := func() {
		spool.Close()
		os.Remove(spool.Name())
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	uncompressed := archive.Uncompressed
	diff, err := store.Diff("", work.ID, &storage.DiffOptions{Compression: &uncompressed})
	if err != nil {
		return nil, nil, fmt.Errorf("reading a step's changes: %w", err)
	}
	_, err = io.Copy(spool, diff)
	if cerr := diff.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading a step's changes: %w", err)
	}
	if _, err = spool.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	return spool, release, nil
}
