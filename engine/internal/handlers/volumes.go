package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
)

func registerVolumeRoutes(r chi.Router, s *Server) {
	v := s.deps.Volumes
	if v == nil {
		return
	}
	h := volumeHandlers{v: v}
	r.Post("/volumes/create", h.create)
	r.Get("/volumes/json", h.list)
	r.Post("/volumes/prune", h.prune)
	r.Get("/volumes/{name}/json", h.inspect)
	r.Get("/volumes/{name}/exists", h.exists)
	r.Delete("/volumes/{name}", h.remove)
}

type volumeHandlers struct {
	v core.Volumes
}

func (h volumeHandlers) create(w http.ResponseWriter, r *http.Request) {
	var opts core.VolumeCreateOptions
	if err := decodeJSONBody(r, &opts); err != nil {
		writeError(w, err)
		return
	}
	vol, err := h.v.Create(r.Context(), opts)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, vol)
}

type volumeListQuery struct {
	Filters map[string][]string `query:"filters"`
}

func (h volumeHandlers) list(w http.ResponseWriter, r *http.Request) {
	var q volumeListQuery
	if err := decodeQuery(r, &q); err != nil {
		writeError(w, err)
		return
	}
	vols, err := h.v.List(r.Context(), q.Filters)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, vols)
}

func (h volumeHandlers) prune(w http.ResponseWriter, r *http.Request) {
	var q volumeListQuery
	if err := decodeQuery(r, &q); err != nil {
		writeError(w, err)
		return
	}
	reports, err := h.v.Prune(r.Context(), q.Filters)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reports)
}

func (h volumeHandlers) inspect(w http.ResponseWriter, r *http.Request) {
	vol, err := h.v.Inspect(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, vol)
}

func (h volumeHandlers) exists(w http.ResponseWriter, r *http.Request) {
	_, err := h.v.Inspect(r.Context(), pathParam(r, "name"))
	writeExists(w, err, core.ErrNoSuchVolume)
}

type volumeRemoveQuery struct {
	Force bool `query:"force"`
}

func (h volumeHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q volumeRemoveQuery
	if err := decodeQuery(r, &q); err != nil {
		writeError(w, err)
		return
	}
	if err := h.v.Remove(r.Context(), pathParam(r, "name"), q.Force); err != nil {
		writeError(w, err)
		return
	}
	writeNoContent(w)
}
