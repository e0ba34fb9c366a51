package api

import (
	"net/http"

	"github.com/berth-project/berth/uploads/internal/store"
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

func (s *Server) createUpload(w http.ResponseWriter, r *http.Request) {
	u, err := s.store.Create(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.tree.Create(u.ID.String()); err != nil {
		_ = s.store.Delete(r.Context(), u.ID)
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

// deleteUpload removes the metadata first, so that no request or worker finds the upload
// any more, then its files.
func (s *Server) deleteUpload(w http.ResponseWriter, r *http.Request) {
	id := uploadID(r)
	if err := s.store.Delete(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.tree.Remove(id.String()); err != nil {
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
