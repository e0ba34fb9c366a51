package api

import (
	"context"
	"net/http"

	"github.com/berth-project/berth/uploads/internal/guard"
	"github.com/berth-project/berth/uploads/internal/janitor"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/google/uuid"
)

// Page sizes of the list endpoints.
const (
	uploadsDefaultLimit = 25
	uploadsMaxLimit     = 100
	errorsDefaultLimit  = 100
	errorsMaxLimit      = 1000
	imagesDefaultLimit  = 100
	imagesMaxLimit      = 1000
)

// createUpload makes the tree first and then the row, so that no row lacks its tree; a
// tree whose row never came (the process died in between) is removed by the sweep.
func (s *Server) createUpload(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.NewRandom()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.tree.Create(id.String()); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Bounded by guard.Timeout, like a change: the sweep takes a tree without a row older
	// than that for the leftover of a dead create.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), guard.Timeout)
	defer cancel()
	u, err := s.store.Insert(ctx, id)
	if err != nil {
		_ = s.tree.Remove(id.String())
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/uploads/"+u.ID.String())
	writeJSON(w, http.StatusCreated, toJSON(u))
}

func (s *Server) listUploads(w http.ResponseWriter, r *http.Request) {
	p, err := parsePage(r, uploadsDefaultLimit, uploadsMaxLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, total, err := s.store.List(r.Context(), p.limit, p.offset)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]uploadJSON, len(list))
	for i, u := range list {
		out[i] = toJSON(u)
	}
	setPagination(w, p, len(out), total)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getUpload(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, toJSON(uploadFrom(r)))
}

// deleteUpload tombstones the upload, so that no request or worker finds it any more,
// then removes its files and its rows (see janitor.Delete). It runs without the request's
// cancellation: a client hanging up does not leave the deletion to the sweep.
func (s *Server) deleteUpload(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), guard.Timeout)
	defer cancel()
	if err := s.freeing(func() error { return janitor.Delete(ctx, s.store, s.tree, uploadID(r)) }); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) markForProcessing(w http.ResponseWriter, r *http.Request) {
	u, err := s.store.MarkForProcessing(r.Context(), uploadID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.cfg.OnPending()
	writeJSON(w, http.StatusAccepted, toJSON(u))
}

func (s *Server) listErrors(w http.ResponseWriter, r *http.Request) {
	p, err := parsePage(r, errorsDefaultLimit, errorsMaxLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, total, err := s.store.Errors(r.Context(), uploadID(r), p.limit, p.offset)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if list == nil {
		list = []store.FileError{}
	}
	setPagination(w, p, len(list), total)
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	p, err := parsePage(r, imagesDefaultLimit, imagesMaxLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, total, err := s.store.Images(r.Context(), uploadID(r), p.limit, p.offset)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if list == nil {
		list = []store.DeployedImage{}
	}
	setPagination(w, p, len(list), total)
	writeJSON(w, http.StatusOK, list)
}
