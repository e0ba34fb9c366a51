package imagestore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/containers/storage"
)

// dropSymlinkModeDiffs removes from report the "layer content modified"
// findings that are only a symbolic link's permission bits: a layer's tar
// may give a symlink any mode (0644 is common), while Linux always shows a
// symlink as 0777 and ignores its mode. containers/storage's full check
// compares them all the same; left in, every such image looks damaged and a
// repair removes it. Only layers with such findings are mounted, to confirm
// that each path really is a symlink.
func (s *Store) dropSymlinkModeDiffs(report *storage.CheckReport) {
	benign := map[error]bool{}
	for _, layers := range []map[string][]error{report.Layers, report.ROLayers} {
		for id, errs := range layers {
			var candidates []error
			var paths []string
			for _, err := range errs {
				if p, ok := modeOnlyDiff(id, err); ok {
					candidates = append(candidates, err)
					paths = append(paths, p)
				}
			}
			if len(candidates) == 0 {
				continue
			}
			mountPoint, err := s.store.Mount(id, "")
			if err != nil {
				continue
			}
			for i, p := range paths {
				if info, err := os.Lstat(filepath.Join(mountPoint, p)); err == nil && info.Mode()&os.ModeSymlink != 0 {
					benign[candidates[i]] = true
				}
			}
			if _, err := s.store.Unmount(id, false); err != nil {
				s.logger.Warn("unmounting a checked layer", "layer", id, "error", err)
			}
		}
	}
	if len(benign) == 0 {
		return
	}
	for _, section := range []map[string][]error{report.Layers, report.ROLayers, report.Images, report.ROImages, report.Containers} {
		for id, errs := range section {
			kept := errs[:0]
			for _, err := range errs {
				if !benign[err] {
					kept = append(kept, err)
				}
			}
			if len(kept) == 0 {
				delete(section, id)
			} else {
				section[id] = kept
			}
		}
	}
}

// modeOnlyDiff reads a content finding of layer id: it returns the path
// when the only difference storage found there is the permission bits.
// storage reports a finding as "layer ID: [+]PATH(ATTR:A￫B,...), layer
// content modified", the only place it says which path and attribute.
func modeOnlyDiff(id string, err error) (string, bool) {
	if !errors.Is(err, storage.ErrLayerContentModified) {
		return "", false
	}
	msg := strings.TrimSuffix(err.Error(), ", "+storage.ErrLayerContentModified.Error())
	_, diff, found := strings.Cut(msg, "layer "+id+": ")
	if !found || !strings.HasSuffix(diff, ")") {
		return "", false
	}
	open := strings.LastIndex(diff, "(")
	if open <= 0 {
		return "", false
	}
	for _, attr := range strings.Split(diff[open+1:len(diff)-1], ",") {
		if !strings.HasPrefix(attr, "mode:") {
			return "", false
		}
	}
	// A file present in both trees may be reported with a "+" (replaced).
	return strings.TrimPrefix(diff[:open], "+"), true
}
