package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "crypto/sha512" // sha384 and sha512 for --checksum
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/opencontainers/go-digest"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
)

// gitSuffix tells a git repository from a file among ADD's URLs, as
// Buildah does: the URL's path ends in .git, optionally followed by a
// #ref[:subdir] fragment.
var gitSuffix = regexp.MustCompile(`\.git(#.+)?$`)

// remoteKind is what an ADD source names.
type remoteKind int

const (
	localSource remoteKind = iota
	urlSource
	gitSource
)

// sourceKind classifies an ADD source. Only http and https are fetched
// (Buildah's rule); any other scheme, and git@ addresses, are refused
// rather than read as context paths.
func sourceKind(s string) (remoteKind, error) {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		if gitSuffix.MatchString(s) {
			return gitSource, nil
		}
		return urlSource, nil
	}
	if strings.Contains(s, "://") || strings.HasPrefix(s, "git@") {
		return localSource, fmt.Errorf("ADD %s: only http:// and https:// URLs are supported (a git repository as an http(s) URL ending in .git)", s)
	}
	return localSource, nil
}

// fetched is a remote ADD source brought onto the engine's disk: name
// (relative to the copy source's root) is what ADD copies.
type fetched struct {
	src  *copySource
	name string
}

// fetchRemote downloads a URL or clones a git repository into a directory
// of its own under ROOT/tmp; the copy source's release removes it.
func (j *job) fetchRemote(ctx context.Context, kind remoteKind, raw, checksum string, keepGitDir bool) (*fetched, error) {
	dir, err := os.MkdirTemp(j.b.tmpDir(), tmpPrefix+"remote-")
	if err != nil {
		return nil, err
	}
	release := func() { os.RemoveAll(dir) }
	var f *fetched
	if kind == gitSource {
		f, err = j.cloneGit(ctx, dir, raw, keepGitDir)
	} else {
		f, err = j.download(ctx, dir, raw, checksum)
	}
	if err != nil {
		release()
		return nil, err
	}
	f.src.release = release
	return f, nil
}

// download fetches a URL as ADD does: the file is named after the URL's
// last path element, gets mode 0600 and the Last-Modified time (the Unix
// epoch without one), and is never unpacked. A --checksum digest must
// match the content. The size is bounded like a build context's.
func (j *job) download(ctx context.Context, dir, raw, checksum string) (*fetched, error) {
	var want digest.Digest
	if checksum != "" {
		d, err := digest.Parse(checksum)
		if err != nil {
			return nil, fmt.Errorf("invalid --checksum %q: %w", checksum, err)
		}
		want = d
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("ADD %s: %w", raw, err)
	}
	name := path.Base(u.Path)
	if name == "/" || name == "." || name == "" {
		return nil, fmt.Errorf("ADD %s: the URL has no file name in its path", raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("ADD %s: %w", raw, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", raw, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return nil, fmt.Errorf("reading %q: invalid response status %d", raw, resp.StatusCode)
	}
	mtime := time.Unix(0, 0).UTC()
	if lm := resp.Header.Get("Last-Modified"); lm != "" {
		t, err := http.ParseTime(lm)
		if err != nil {
			return nil, fmt.Errorf("reading %q: parsing last-modified time %q: %w", raw, lm, err)
		}
		mtime = t
	}
	target := filepath.Join(dir, name)
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	writers := []io.Writer{out, sum}
	var digester digest.Digester
	if want != "" {
		digester = want.Algorithm().Digester()
		writers = append(writers, digester.Hash())
	}
	budget := sizelimit.New(j.b.o.MaxContextSize, "ADD download")
	_, err = budget.Copy(ctx, io.MultiWriter(writers...), resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", raw, err)
	}
	if digester != nil && digester.Digest() != want {
		return nil, fmt.Errorf("unexpected response digest for %q: %s, want %s", raw, digester.Digest(), want)
	}
	if err := os.Chtimes(target, mtime, mtime); err != nil {
		return nil, err
	}
	id := fmt.Sprintf("url %s sha256:%x %d", raw, sum.Sum(nil), mtime.UnixNano())
	return &fetched{src: &copySource{root: dir, id: id}, name: name}, nil
}

// cloneGit clones a repository for ADD: URL#ref:subdir checks out ref (a
// branch, tag or commit) and copies subdir; without --keep-git-dir the
// .git directory is left out. Only http and https are allowed, also for
// submodules and redirects.
func (j *job) cloneGit(ctx context.Context, dir, raw string, keepGitDir bool) (*fetched, error) {
	repo, fragment, _ := strings.Cut(raw, "#")
	ref, subdir, _ := strings.Cut(fragment, ":")
	if strings.HasPrefix(ref, "-") {
		return nil, fmt.Errorf("ADD %s: %q is not a git reference", raw, ref)
	}
	clone := filepath.Join(dir, "clone")
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_TERMINAL_PROMPT=0",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_ALLOW_PROTOCOL=http:https",
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				return "", errors.New("git is not installed on the engine's host")
			}
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(stdout.String()), nil
	}
	if _, err := git("clone", "-q", "--recurse-submodules", "--", repo, clone); err != nil {
		return nil, fmt.Errorf("cloning %s: %w", repo, err)
	}
	if ref != "" {
		if _, err := git("-C", clone, "checkout", "-q", ref, "--"); err != nil {
			return nil, fmt.Errorf("checking out %q of %s: %w", ref, repo, err)
		}
		if _, err := git("-C", clone, "submodule", "update", "-q", "--init", "--recursive"); err != nil {
			return nil, fmt.Errorf("updating the submodules of %s: %w", repo, err)
		}
	}
	commit, err := git("-C", clone, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	if !keepGitDir {
		if err := os.RemoveAll(filepath.Join(clone, ".git")); err != nil {
			return nil, err
		}
	}
	root := clone
	if subdir != "" {
		if root, err = securejoin.SecureJoin(clone, subdir); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("ADD %s: %q is not a directory of the repository", raw, subdir)
		}
	}
	id := fmt.Sprintf("git %s %s %s keep=%t", repo, commit, subdir, keepGitDir)
	return &fetched{src: &copySource{root: root, id: id}, name: "."}, nil
}
