package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/guard"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/google/uuid"
)

// Page sizes of directory listings.
const (
	childrenDefaultLimit = 100
	childrenMaxLimit     = 1000
)

// getFile answers JSON info about a file or directory (children paged by ?marker= and
// ?limit=), or with "Accept: application/octet-stream" the bytes of a file, with Range
// and conditional requests handled by http.ServeContent.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	id, rel := uploadID(r).String(), filePathFrom(r)
	if wantsOctetStream(r) {
		f, fi, err := s.tree.Open(id, rel)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", octetStream)
		http.ServeContent(&problemOnError{ResponseWriter: w, r: r}, r, path.Base(rel), fi.ModTime(), f)
		return
	}
	limit := childrenDefaultLimit
	if v := r.URL.Query().Get("limit"); v != "" || r.URL.Query().Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > childrenMaxLimit {
			s.writeError(w, r, badQuery("limit", v, fmt.Sprintf("an integer from 1 to %d", childrenMaxLimit)))
			return
		}
		limit = n
	}
	info, err := s.tree.Stat(id, rel, r.URL.Query().Get("marker"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// wantsOctetStream reports whether Accept names application/octet-stream with a
// non-zero quality.
func wantsOctetStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != octetStream {
			continue
		}
		if q, err := strconv.ParseFloat(params["q"], 64); params["q"] != "" && (err != nil || q <= 0) {
			continue
		}
		return true
	}
	return false
}

// problemOnError lets http.ServeContent decide statuses (206, 304, 412, 416) but turns
// its plain-text error bodies into problem documents.
type problemOnError struct {
	http.ResponseWriter
	r      *http.Request
	failed bool
}

func (p *problemOnError) WriteHeader(code int) {
	if code < 400 {
		p.ResponseWriter.WriteHeader(code)
		return
	}
	p.failed = true
	re := &requestError{status: code, slug: "serve-failed", title: http.StatusText(code), detail: "the file could not be served"}
	switch code {
	case http.StatusRequestedRangeNotSatisfiable:
		re.slug, re.detail = "range-not-satisfiable", "the Range header does not overlap the file ("+p.Header().Get("Content-Range")+")"
	case http.StatusPreconditionFailed:
		re.slug, re.detail = "precondition-failed", "the file does not match the request's preconditions"
	}
	writeProblem(p.ResponseWriter, p.r, re)
}

func (p *problemOnError) Write(b []byte) (int, error) {
	if p.failed {
		return len(b), nil
	}
	return p.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (p *problemOnError) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// putFile streams the body into the file; the write is reserved against the upload's
// limits before it becomes visible, and nothing remains of a refused or failed write.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) {
	id, rel := uploadID(r), filePathFrom(r)
	lim := s.cfg.Limits
	switch {
	case rel == files.Root:
		s.writeError(w, r, files.ErrRootRefused)
		return
	case lim.MaxPathLength > 0 && len(rel) > lim.MaxPathLength:
		s.writeError(w, r, &files.LimitError{Limit: "maxPathLength", Max: int64(lim.MaxPathLength)})
		return
	case lim.MaxPathDepth > 0 && files.Depth(rel) > lim.MaxPathDepth:
		s.writeError(w, r, &files.LimitError{Limit: "maxPathDepth", Max: int64(lim.MaxPathDepth)})
		return
	}
	// The stream is cut at the smaller of the file limit and the room left in the upload
	// (counting the file it replaces), so an oversized body is refused as soon as
	// possible; the store's reservation stays the authority under concurrency.
	capSize, capLimit := lim.MaxFileSize, "maxFileSize"
	if capSize <= 0 {
		capSize = math.MaxInt64 - 1
	}
	if lim.MaxUploadSize > 0 {
		// Temporaries (writes in progress, leftovers of killed ones) count too.
		room := max(lim.MaxUploadSize-uploadFrom(r).Bytes-s.tree.TempBytes(id.String())+s.tree.FileSize(id.String(), rel), 0)
		if room < capSize {
			capSize, capLimit = room, "maxUploadSize"
		}
	}
	capErr := func() error {
		limit := lim.MaxFileSize
		if capLimit == "maxUploadSize" {
			limit = lim.MaxUploadSize
		}
		return &files.LimitError{Limit: capLimit, Max: limit}
	}
	if r.ContentLength > capSize {
		s.writeError(w, r, capErr())
		return
	}
	if err := s.cfg.Space.Admit(r.ContentLength); err != nil {
		s.writeError(w, r, err)
		return
	}
	_, err := s.tree.Put(id.String(), rel, bodyReader{r.Body}, r.ContentLength, capSize, s.guard(r.Context(), id))
	var le *files.LimitError
	if errors.As(err, &le) && le.Limit == "maxFileSize" {
		err = capErr()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// guard is the lock and the books of upload id for a change by a request: only while
// the upload is open, within the upload limits.
func (s *Server) guard(ctx context.Context, id uuid.UUID) guard.Guard {
	return guard.New(ctx, s.store, id, files.Limits{MaxBytes: s.cfg.Limits.MaxUploadSize, MaxFiles: s.cfg.Limits.MaxFiles}, store.StatusOpen)
}

// freeing runs a delete; when it finds the disk full (the database in the data directory
// cannot write; intents cannot be made), it gives up the headroom reserve and tries again.
func (s *Server) freeing(del func() error) error {
	err := del()
	if store.DiskFull(err) && s.cfg.Space.Release() {
		s.logger.Warn("disk full: gave up the headroom reserve to delete", "err", err)
		err = del()
	}
	return err
}

// bodyReader tags errors of the request body as the client's.
type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &bodyError{err: err}
	}
	return n, err
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	id, rel := uploadID(r), filePathFrom(r)
	err := s.freeing(func() error { return s.tree.Delete(id.String(), rel, s.guard(r.Context(), id)) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
