package handlers

import (
	"errors"
	"mime"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
)

func registerQuadletRoutes(r chi.Router, s *Server) {
	q := s.deps.Quadlets
	if q == nil {
		return
	}
	h := quadletHandlers{q: q}
	r.Post("/quadlets", h.install)
	r.Get("/quadlets/json", h.list)
	r.Get("/quadlets/{name}/exists", h.exists)
	r.Get("/quadlets/{name}/file", h.print)
	r.Delete("/quadlets", h.removeMany)
	r.Delete("/quadlets/{name}", h.remove)
}

type quadletHandlers struct {
	q core.Quadlets
}

// errNoSystemd refuses reload-systemd: no systemd runs beside the engine.
var errNoSystemd = errors.New("no systemd runs here: quadlets are kept by the engine, not handed to systemd")

// reloadQuery is the systemd reload switch Podman's quadlet routes take
// (reload-systemd; reloadSystemd as the issue spells it). Unlike Podman it
// defaults to false, and true is refused.
type reloadQuery struct {
	Reload      bool `query:"reload-systemd"`
	ReloadCamel bool `query:"reloadSystemd"`
}

func (q reloadQuery) check() error {
	if q.Reload {
		return core.InvalidArgument("reload-systemd", errNoSystemd)
	}
	if q.ReloadCamel {
		return core.InvalidArgument("reloadSystemd", errNoSystemd)
	}
	return nil
}

// quadletQueryInto decodes a quadlet route's own parameters into q, then its
// systemd reload switch, which is refused when set.
func quadletQueryInto(r *http.Request, q any) error {
	if err := decodeQuery(r, q); err != nil {
		return err
	}
	var rq reloadQuery
	if err := decodeQuery(r, &rq); err != nil {
		return err
	}
	return rq.check()
}

func (h quadletHandlers) install(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Replace bool `query:"replace"`
	}
	if err := quadletQueryInto(r, &q); err != nil {
		writeError(w, err)
		return
	}
	headers := r.Header
	if ct := headers.Get("Content-Type"); ct != "" {
		if media, _, _ := mime.ParseMediaType(ct); media != "application/x-tar" && media != "application/tar" {
			writeError(w, core.InvalidArgument("Content-Type", errors.New("the body must be a tar archive (application/x-tar)")))
			return
		}
	}
	report, err := h.q.Install(r.Context(), r.Body, core.QuadletInstallOptions{Replace: q.Replace})
	answerJSON(w, report, err)
}

func (h quadletHandlers) list(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Filters map[string][]string `query:"filters"`
	}
	if err := decodeQuery(r, &q); err != nil {
		writeError(w, err)
		return
	}
	list, err := h.q.List(r.Context(), q.Filters)
	answerJSON(w, list, err)
}

func (h quadletHandlers) exists(w http.ResponseWriter, r *http.Request) {
	writeExists(w, h.q.Exists(r.Context(), pathParam(r, "name")), core.ErrNoSuchQuadlet)
}

func (h quadletHandlers) print(w http.ResponseWriter, r *http.Request) {
	text, err := h.q.Print(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(text))
}

func (h quadletHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Force  bool `query:"force"`
		Ignore bool `query:"ignore"`
	}
	if err := quadletQueryInto(r, &q); err != nil {
		writeError(w, err)
		return
	}
	name := pathParam(r, "name")
	report, err := h.q.Remove(r.Context(), []string{name}, core.QuadletRemoveOptions{Force: q.Force, Ignore: q.Ignore})
	if msg := report.Errors[name]; err == nil && msg != "" {
		if err = h.q.Exists(r.Context(), name); err == nil {
			err = errors.New(msg)
		}
	}
	answerJSON(w, report, err)
}

func (h quadletHandlers) removeMany(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Quadlets []string `query:"quadlets"`
		All      bool     `query:"all"`
		Force    bool     `query:"force"`
		Ignore   bool     `query:"ignore"`
	}
	if err := quadletQueryInto(r, &q); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case !q.All && len(q.Quadlets) == 0:
		writeError(w, core.InvalidArgument("quadlets", errors.New("must provide at least 1 quadlet to remove or set all=true")))
		return
	case q.All && len(q.Quadlets) > 0:
		writeError(w, core.InvalidArgument("all", errors.New("when setting all=true, you may not pass any quadlet names")))
		return
	}
	report, err := h.q.Remove(r.Context(), q.Quadlets, core.QuadletRemoveOptions{All: q.All, Force: q.Force, Ignore: q.Ignore})
	answerJSON(w, report, err)
}
