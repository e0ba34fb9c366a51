package deploy

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// unitExtensions are the quadlet unit types, in the order their units are installed:
// what others refer to (networks, volumes, images, builds, pods) comes before what uses
// it (containers, kube units).
var unitExtensions = []string{".network", ".volume", ".image", ".build", ".pod", ".container", ".kube"}

// unitExtension returns the quadlet extension of rel (".container" ...), or "".
func unitExtension(rel string) string {
	ext := strings.ToLower(path.Ext(rel))
	if slices.Contains(unitExtensions, ext) && len(path.Base(rel)) > len(ext) {
		return ext
	}
	return ""
}

// pathKeys are the unit keys whose value is a file or directory a quadlet needs beside
// its unit: a relative value names a file (or a directory of files) of the upload,
// relative to the unit's own directory, as Podman's generator reads it.
var pathKeys = map[string]bool{
	"Yaml":                 true, // .kube
	"ConfigMap":            true, // .kube
	"EnvironmentFile":      true, // .container
	"SeccompProfile":       true, // .container
	"File":                 true, // .build
	"SetWorkingDirectory":  true, // .build: a context directory (its words "file" and "unit" are not paths)
	"IgnoreFile":           true, // .build
	"ContainersConfModule": true, // every unit
	"AuthFile":             true, // .image, .build, .container
	"CertDir":              true, // .image, .build
}

// systemdSections are the unit sections systemd itself reads; their paths are host
// paths of the service, not files of the quadlet.
var systemdSections = map[string]bool{"Unit": true, "Service": true, "Install": true}

// unitReferences returns the files of the upload that the unit at unitRel (whose bytes
// are content) references, in lexical order. has reports whether a slash path is a file
// of the upload; files lists them all (for directory references). A reference outside
// the unit's directory, absolute, with a systemd specifier (%), naming no file of the
// upload or naming another unit is left to the engine: it is not sent. A unit that does
// not parse references nothing; the engine reports its syntax error.
func unitReferences(unitRel string, content []byte, has func(string) bool, files []string) []string {
	options, err := unit.DeserializeOptions(bytes.NewReader(content))
	if err != nil {
		return nil
	}
	base := path.Dir(unitRel)
	seen := map[string]bool{}
	for _, opt := range options {
		if systemdSections[opt.Section] || strings.HasPrefix(opt.Section, "X-") {
			continue
		}
		for _, value := range referencedPaths(opt.Name, opt.Value) {
			for _, rel := range resolve(base, value, has, files) {
				if rel != unitRel && unitExtension(rel) == "" {
					seen[rel] = true
				}
			}
		}
	}
	refs := make([]string, 0, len(seen))
	for rel := range seen {
		refs = append(refs, rel)
	}
	slices.Sort(refs)
	return refs
}

// referencedPaths returns the path-like parts of one key's value that may name files of
// the upload.
func referencedPaths(key, value string) []string {
	value = strings.TrimSpace(value)
	switch {
	case pathKeys[key]:
		if key == "SetWorkingDirectory" && (value == "file" || value == "unit") {
			return nil
		}
		// EnvironmentFile=-path: systemd's "ignore if missing" prefix.
		return []string{strings.TrimPrefix(value, "-")}
	case key == "Volume":
		source, _, _ := strings.Cut(value, ":")
		if strings.HasPrefix(source, "./") {
			return []string{source}
		}
	case key == "Mount":
		for _, field := range strings.Split(value, ",") {
			name, source, ok := strings.Cut(field, "=")
			if ok && (name == "source" || name == "src") && strings.HasPrefix(source, "./") {
				return []string{source}
			}
		}
	}
	return nil
}

// resolve turns value, relative to the unit's directory base, into the files of the
// upload it names: itself when it is a file, the files below it when it is a directory.
func resolve(base, value string, has func(string) bool, files []string) []string {
	if value == "" || strings.HasPrefix(value, "/") || strings.Contains(value, "%") || strings.Contains(value, "://") {
		return nil
	}
	rel := path.Join(base, value)
	if base != "." && !strings.HasPrefix(rel, base+"/") {
		return nil // leaves the unit's directory
	}
	if base == "." && (rel == ".." || strings.HasPrefix(rel, "../")) {
		return nil
	}
	if rel == "." || rel == base {
		return nil // the unit's whole directory: only explicit files go along
	}
	if has(rel) {
		return []string{rel}
	}
	var below []string
	prefix := rel + "/"
	start, _ := slices.BinarySearch(files, prefix)
	for _, f := range files[start:] {
		if !strings.HasPrefix(f, prefix) {
			break
		}
		below = append(below, f)
	}
	return below
}

// writeQuadletTar writes the archive InstallQuadlets takes: the unit under its base
// name, then each referenced file at its path relative to the unit's directory, with
// the directories leading to it, so that the unit finds them where it names them.
func writeQuadletTar(w io.Writer, dir, unitRel string, refs []string) error {
	tw := tar.NewWriter(w)
	base := path.Dir(unitRel)
	if err := addFile(tw, dir, unitRel, path.Base(unitRel)); err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, rel := range refs {
		name := rel
		if base != "." {
			name = strings.TrimPrefix(rel, base+"/")
		}
		var parents []string
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		if err := addFile(tw, dir, rel, name); err != nil {
			return err
		}
	}
	return tw.Close()
}

// addFile writes the upload's file rel into tw as name.
func addFile(tw *tar.Writer, dir, rel, name string) error {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: info.Size(), ModTime: info.ModTime(), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
