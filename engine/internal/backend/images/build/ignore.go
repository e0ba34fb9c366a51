package build

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/berth-project/berth/engine/internal/core"
)

// ignoreFiles are read at the context's root, the first one found wins.
var ignoreFiles = []string{".containerignore", ".dockerignore"}

// excluder decides which context paths COPY and ADD cannot see: those
// matched by the context's ignore file, and the files carrying secrets.
type excluder struct {
	matcher *patternmatcher.PatternMatcher
	// hidden are the secret files; they are hidden under any directory,
	// since Podman's client also sends them under their host path.
	hidden map[string]bool
}

// loadExcluder reads the context's ignore file, if any.
func loadExcluder(files tree, contextDir string, hidden []string) (*excluder, error) {
	ex := &excluder{hidden: map[string]bool{}}
	for _, h := range hidden {
		ex.hidden[filepath.Base(h)] = true
	}
	for _, name := range ignoreFiles {
		p, err := securejoin.SecureJoinVFS(contextDir, name, files)
		if err != nil {
			return nil, err
		}
		data, err := files.readFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		patterns, err := ignorefile.ReadAll(bytes.NewReader(data))
		if err != nil {
			return nil, core.InvalidArgument(name, err)
		}
		return ex, ex.setPatterns(name, patterns)
	}
	return ex, nil
}

func (ex *excluder) setPatterns(field string, patterns []string) error {
	if len(patterns) == 0 {
		return nil
	}
	m, err := patternmatcher.New(patterns)
	if err != nil {
		return core.InvalidArgument(field, fmt.Errorf("bad pattern: %w", err))
	}
	ex.matcher = m
	return nil
}

// excluded reports whether rel (a slash path relative to the context root)
// is hidden from COPY and ADD.
func (ex *excluder) excluded(rel string) bool {
	if ex == nil {
		return false
	}
	if ex.hidden[path.Base(rel)] {
		return true
	}
	if ex.matcher == nil || rel == "." {
		return false
	}
	matched, err := ex.matcher.MatchesOrParentMatches(rel)
	return err == nil && matched
}
