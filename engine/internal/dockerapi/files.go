package dockerapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	containertypes "github.com/docker/docker/api/types/container"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// pathStatHeader carries a path's stat, base64 JSON, on archive answers.
const pathStatHeader = "X-Docker-Container-Path-Stat"

// archiveTarget is what an archive route works on: the archive side of
// the containers service and the path in the container. Without either it
// answers (no route, or a 400) and reports false.
func (s *server) archiveTarget(w http.ResponseWriter, r *http.Request) (core.ContainerArchives, string, bool) {
	a, ok := s.deps.Containers.(core.ContainerArchives)
	if !ok {
		noRoute(w, r)
		return nil, "", false
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, core.InvalidArgument("path", errors.New("a path is required")))
		return nil, "", false
	}
	return a, p, true
}

func setPathStat(w http.ResponseWriter, st core.PathStat) {
	raw, _ := json.Marshal(containertypes.PathStat{Name: st.Name, Size: st.Size, Mode: st.Mode, Mtime: st.ModTime, LinkTarget: st.LinkTarget})
	w.Header().Set(pathStatHeader, base64.StdEncoding.EncodeToString(raw))
}

// archiveStat answers HEAD archive (docker cp's first look).
func (s *server) archiveStat(w http.ResponseWriter, r *http.Request) {
	a, p, ok := s.archiveTarget(w, r)
	if !ok {
		return
	}
	st, err := a.StatPath(r.Context(), pathParam(r, "name"), p, core.DockerArchive)
	if err != nil {
		w.WriteHeader(httpwire.StatusOf(err))
		return
	}
	setPathStat(w, st)
	w.WriteHeader(http.StatusOK)
}

// archiveGet streams a path as a tar.
func (s *server) archiveGet(w http.ResponseWriter, r *http.Request) {
	a, p, ok := s.archiveTarget(w, r)
	if !ok {
		return
	}
	started := false
	err := a.GetArchive(r.Context(), pathParam(r, "name"), p, core.DockerArchive, func(st core.PathStat) io.Writer {
		started = true
		setPathStat(w, st)
		w.Header().Set("Content-Type", "application/x-tar")
		w.WriteHeader(http.StatusOK)
		return w
	})
	if err != nil && !started {
		writeArchiveError(w, r, p, err)
	}
}

// writeArchiveError answers a failed archive request; a path missing in
// the container in dockerd's words, which docker cp prints as they come.
func writeArchiveError(w http.ResponseWriter, r *http.Request, path string, err error) {
	if errors.Is(err, core.ErrNoSuchPath) {
		writeMessage(w, http.StatusNotFound, "Could not find the file "+path+" in container "+pathParam(r, "name"))
		return
	}
	writeError(w, err)
}

// archivePut extracts a tar into a directory of the container.
func (s *server) archivePut(w http.ResponseWriter, r *http.Request) {
	a, p, ok := s.archiveTarget(w, r)
	if !ok {
		return
	}
	q := queryOf(r)
	opts := core.PutArchiveOptions{
		CopyUIDGID:           q.boolean("copyUIDGID", false),
		NoOverwriteDirNonDir: q.boolean("noOverwriteDirNonDir", false),
	}
	if err := a.PutArchive(r.Context(), pathParam(r, "name"), p, r.Body, opts); err != nil {
		writeArchiveError(w, r, p, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// containerChanges answers docker diff.
func (s *server) containerChanges(w http.ResponseWriter, r *http.Request) {
	f, ok := s.deps.Containers.(core.ContainerFilesystems)
	if !ok {
		noRoute(w, r)
		return
	}
	changes, err := f.Changes(r.Context(), pathParam(r, "name"), core.ChangesOptions{Kind: core.DiffContainer})
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]containertypes.FilesystemChange, 0, len(changes))
	for _, c := range changes {
		out = append(out, containertypes.FilesystemChange{Path: c.Path, Kind: containertypes.ChangeType(c.Kind)})
	}
	writeJSON(w, http.StatusOK, out)
}

// containerExport streams a container's root filesystem as a tar.
func (s *server) containerExport(w http.ResponseWriter, r *http.Request) {
	f, ok := s.deps.Containers.(core.ContainerFilesystems)
	if !ok {
		noRoute(w, r)
		return
	}
	sw := &httpwire.TarAnswer{W: w}
	if err := f.Export(r.Context(), pathParam(r, "name"), sw); err != nil && !sw.Started {
		writeError(w, err)
	}
}

// commit answers docker commit: the container's changes as a new image.
func (s *server) commit(w http.ResponseWriter, r *http.Request) {
	cm, ok := s.deps.Containers.(core.ContainerCommits)
	if !ok {
		noRoute(w, r)
		return
	}
	q := queryOf(r)
	container := q.str("container")
	if container == "" {
		writeError(w, core.InvalidArgument("container", errors.New("a container is required")))
		return
	}
	var body containertypes.Config
	if err := decodeBody(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.Image != "" || len(body.Cmd) > 0 || len(body.Entrypoint) > 0 || len(body.Env) > 0 || len(body.Labels) > 0 {
		writeError(w, core.InvalidArgument("body", errors.New("a configuration in the body is not supported: use changes")))
		return
	}
	opts := core.CommitOptions{Author: q.str("author"), Comment: q.str("comment"), Pause: q.boolean("pause", true), Format: "docker"}
	for _, change := range q.v["changes"] {
		for _, line := range strings.Split(change, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				opts.Changes = append(opts.Changes, line)
			}
		}
	}
	if repo := q.str("repo"); repo != "" {
		opts.Reference = withTag(repo, q.str("tag"))
	} else if q.str("tag") != "" {
		writeError(w, core.InvalidArgument("tag", errors.New("a tag needs repo")))
		return
	}
	id, err := cm.Commit(r.Context(), container, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"Id": imageID(id)})
}
