package handlers

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// pathStatHeader carries a path's stat, base64 JSON, on archive answers.
const pathStatHeader = "X-Docker-Container-Path-Stat"

type archiveHandlers struct {
	a core.ContainerArchives
}

// archivePath decodes the path parameter every archive route needs.
func archivePath(w http.ResponseWriter, r *http.Request) (string, bool) {
	var q struct {
		Path string `query:"path"`
	}
	if !queryInto(w, r, &q) {
		return "", false
	}
	if q.Path == "" {
		writeError(w, core.InvalidArgument("path", errors.New("a path is required")))
		return "", false
	}
	return q.Path, true
}

// setPathStat adds the stat header.
func setPathStat(w http.ResponseWriter, st core.PathStat) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	w.Header().Set(pathStatHeader, base64.URLEncoding.EncodeToString(raw))
	return nil
}

// stat answers HEAD: the stat header and 200, or the error (404 for a
// missing path).
func (h archiveHandlers) stat(w http.ResponseWriter, r *http.Request) {
	p, ok := archivePath(w, r)
	if !ok {
		return
	}
	st, err := h.a.StatPath(r.Context(), pathParam(r, "name"), p, core.PodmanArchive)
	if err == nil {
		err = setPathStat(w, st)
	}
	finishStatus(w, http.StatusOK, err)
}

// get streams the path as a tar, with the stat header.
func (h archiveHandlers) get(w http.ResponseWriter, r *http.Request) {
	p, ok := archivePath(w, r)
	if !ok {
		return
	}
	started := false
	err := h.a.GetArchive(r.Context(), pathParam(r, "name"), p, core.PodmanArchive, func(st core.PathStat) io.Writer {
		started = true
		if err := setPathStat(w, st); err != nil {
			return errWriter{err}
		}
		w.Header().Set("Content-Type", "application/x-tar")
		w.WriteHeader(http.StatusOK)
		return w
	})
	if err != nil && !started {
		writeError(w, err)
	}
}

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

// put extracts the request body (a tar, possibly compressed) into the
// directory path.
func (h archiveHandlers) put(w http.ResponseWriter, r *http.Request) {
	// Podman's server owns extracted files by the container's user unless
	// told otherwise (copyUIDGID defaults to true on libpod paths).
	q := struct {
		Path                 string `query:"path"`
		CopyUIDGID           bool   `query:"copyuidgid"`
		NoOverwriteDirNonDir bool   `query:"nooverwritedirnondir"`
		Rename               string `query:"rename"`
	}{CopyUIDGID: true}
	if !queryInto(w, r, &q) {
		return
	}
	if q.Path == "" {
		writeError(w, core.InvalidArgument("path", errors.New("a path is required")))
		return
	}
	opts := core.PutArchiveOptions{CopyUIDGID: q.CopyUIDGID, NoOverwriteDirNonDir: q.NoOverwriteDirNonDir}
	if q.Rename != "" {
		if err := json.Unmarshal([]byte(q.Rename), &opts.Rename); err != nil {
			writeError(w, core.InvalidArgument("rename", fmt.Errorf("must be a JSON object of names: %w", err)))
			return
		}
	}
	finishStatus(w, http.StatusOK, h.a.PutArchive(r.Context(), pathParam(r, "name"), q.Path, r.Body, opts))
}

// changesHandler lists the changes of a container or image (Podman serves
// both paths with one handler: diffType says what the name may be).
func changesHandler(f core.ContainerFilesystems) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var q struct {
			Parent   string `query:"parent"`
			DiffType string `query:"difftype"`
		}
		if !queryInto(w, r, &q) {
			return
		}
		changes, err := f.Changes(r.Context(), pathParam(r, "name"), core.ChangesOptions{Kind: q.DiffType, Parent: q.Parent})
		finishJSON(w, http.StatusOK, changes, err)
	}
}

// commitReport is one line of a streamed commit, in Podman's shape.
type commitReport struct {
	Stream      string       `json:"stream,omitempty"`
	Error       string       `json:"error,omitempty"`
	ErrorDetail *errorDetail `json:"errorDetail,omitempty"`
}

// commitHandler is CommitContainer: {"Id": ...}, or with stream=true JSON
// lines ending with the image ID (or the error).
func commitHandler(c core.ContainerCommits) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := struct {
			Container string   `query:"container"`
			Repo      string   `query:"repo"`
			Tag       string   `query:"tag"`
			Comment   string   `query:"comment"`
			Author    string   `query:"author"`
			Changes   []string `query:"changes"`
			Pause     bool     `query:"pause"`
			Format    string   `query:"format"`
			Squash    bool     `query:"squash"`
			Stream    bool     `query:"stream"`
		}{Format: "oci"}
		if !queryInto(w, r, &q) {
			return
		}
		if q.Container == "" {
			writeError(w, core.InvalidArgument("container", errors.New("a container is required")))
			return
		}
		// Podman 4 clients send tag=latest with or without a repository;
		// another tag without one would be lost.
		if q.Repo == "" && q.Tag != "" && q.Tag != "latest" {
			writeError(w, core.InvalidArgument("tag", errors.New("a tag needs repo")))
			return
		}
		opts := core.CommitOptions{
			Author: q.Author, Comment: q.Comment, Pause: q.Pause, Format: q.Format, Squash: q.Squash,
		}
		// Podman 5 sends the configuration to merge (commit --config) as
		// the body; older clients send none.
		var config core.CommitConfig
		if err := decodeStrict(r, &config); err != nil {
			writeError(w, err)
			return
		}
		if !reflect.ValueOf(config).IsZero() {
			opts.Config = &config
		}
		for _, change := range q.Changes {
			for _, line := range strings.Split(change, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					opts.Changes = append(opts.Changes, line)
				}
			}
		}
		if q.Repo != "" {
			tag := q.Tag
			if tag == "" {
				tag = "latest"
			}
			opts.Reference = q.Repo + ":" + tag
		}
		if !q.Stream {
			id, err := c.Commit(r.Context(), q.Container, opts)
			finishJSON(w, http.StatusOK, map[string]string{"Id": id}, err)
			return
		}
		stream := newJSONStream(w)
		stream.send(commitReport{Stream: "Committing container " + q.Container + "\n"})
		id, err := c.Commit(r.Context(), q.Container, opts)
		if err != nil {
			stream.send(commitReport{Error: err.Error(), ErrorDetail: &errorDetail{Message: err.Error()}})
			return
		}
		stream.send(commitReport{Stream: id})
	}
}
