package kube

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/berth-project/berth/engine/internal/core"
)

// playFile is the YAML a played archive holds at its root, as Podman 5
// names it; without it, every *.yaml and *.yml file at the root is played.
const playFile = "play.yaml"

// unpack extracts a tar into dir (regular files and directories only; an
// entry that would land outside dir, a link, a device or more than max
// bytes is ErrInvalidArgument) and returns the YAML to play.
func unpack(r io.Reader, dir string, max int64) ([]byte, error) {
	tr := tar.NewReader(r)
	var total int64
	var rootYAML []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, core.InvalidArgument("body", fmt.Errorf("not a tar archive: %w", err))
		}
		name := path.Clean("/" + strings.ReplaceAll(hdr.Name, "\\", "/"))
		if name == "/" {
			continue
		}
		if strings.Contains(hdr.Name, "..") && hasDotDot(hdr.Name) {
			return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q escapes the archive", hdr.Name))
		}
		target, err := securejoin.SecureJoin(dir, name)
		if err != nil {
			return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q: %w", hdr.Name, err))
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if hdr.Size < 0 || total+hdr.Size > max {
				return nil, fmt.Errorf("archive expands beyond %d bytes: %w", max, core.ErrTooLarge)
			}
			total += hdr.Size
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return nil, err
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_EXCL, 0o644)
			if err != nil {
				return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q: %w", hdr.Name, err))
			}
			_, err = io.Copy(f, io.LimitReader(tr, hdr.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q: %w", hdr.Name, err))
			}
			if strings.Count(name, "/") == 1 && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
				rootYAML = append(rootYAML, strings.TrimPrefix(name, "/"))
			}
		case tar.TypeXGlobalHeader:
		default:
			return nil, core.InvalidArgument("body", fmt.Errorf("tar entry %q: only files and directories are accepted", hdr.Name))
		}
	}
	sort.Strings(rootYAML)
	for _, n := range rootYAML {
		if n == playFile {
			rootYAML = []string{n}
			break
		}
	}
	if len(rootYAML) == 0 {
		return nil, core.InvalidArgument("body", errors.New("the archive holds no play.yaml nor any *.yaml or *.yml file at its root"))
	}
	var out bytes.Buffer
	for i, n := range rootYAML {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("\n---\n")
		}
		out.Write(data)
	}
	return out.Bytes(), nil
}

func hasDotDot(name string) bool {
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return true
		}
	}
	return false
}
