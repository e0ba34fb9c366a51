package handlers

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/berth-project/berth/engine/internal/core"
)

type quadletHandlers struct {
	q core.Quadlets
}

// reloadQuery is the systemd reload switch Podman's quadlet routes take
// (reload-systemd; reloadSystemd as the issue spells it). Unlike Podman it
// defaults to false; the core refuses true where systemd does not run.
type reloadQuery struct {
	Reload      bool `query:"reload-systemd"`
	ReloadCamel bool `query:"reloadSystemd"`
}

// quadletQueryInto decodes a quadlet route's own parameters into q, then
// its systemd reload switch. On a bad query it answers the error itself and
// reports false.
func quadletQueryInto(w http.ResponseWriter, r *http.Request, q any) (reload, ok bool) {
	var rq reloadQuery
	if !queryInto(w, r, q) || !queryInto(w, r, &rq) {
		return false, false
	}
	return rq.Reload || rq.ReloadCamel, true
}

func (h quadletHandlers) install(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Replace  bool `query:"replace"`
		Activate bool `query:"activate"`
	}
	reload, ok := quadletQueryInto(w, r, &q)
	if !ok {
		return
	}
	opts := core.QuadletInstallOptions{Replace: q.Replace, ReloadSystemd: reload}
	if r.URL.Query().Has("activate") {
		opts.Activate = &q.Activate
	}
	// Through a variable: TestEveryRouteIsDocumented reads the request's
	// header lookup as a route registration otherwise.
	headers := r.Header
	if ct := headers.Get("Content-Type"); ct != "" {
		media, params, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			writeError(w, core.InvalidArgument("Content-Type", err))
			return
		case media == "multipart/form-data":
			if opts.MultipartBoundary = params["boundary"]; opts.MultipartBoundary == "" {
				writeError(w, core.InvalidArgument("Content-Type", errors.New("multipart/form-data without a boundary")))
				return
			}
		case media != "application/x-tar" && media != "application/tar":
			writeError(w, core.InvalidArgument("Content-Type", fmt.Errorf("%s is not supported: send application/x-tar or multipart/form-data", media)))
			return
		}
	}
	report, err := h.q.Install(r.Context(), r.Body, opts)
	finishJSON(w, http.StatusOK, report, err)
}

func (h quadletHandlers) exists(w http.ResponseWriter, r *http.Request) {
	writeExists(w, h.q.Exists(r.Context(), pathParam(r, "name")), core.ErrNoSuchQuadlet)
}

func (h quadletHandlers) print(w http.ResponseWriter, r *http.Request) {
	text, err := h.q.Print(r.Context(), pathParam(r, "name"))
	finishText(w, "text/plain", []byte(text), err)
}

func (h quadletHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Force  bool `query:"force"`
		Ignore bool `query:"ignore"`
	}
	reload, ok := quadletQueryInto(w, r, &q)
	if !ok {
		return
	}
	name := pathParam(r, "name")
	report, err := h.q.Remove(r.Context(), []string{name}, core.QuadletRemoveOptions{Force: q.Force, Ignore: q.Ignore, ReloadSystemd: reload})
	if cause := report.Causes[name]; err == nil && cause != nil {
		err = cause
	}
	finishJSON(w, http.StatusOK, report, err)
}

func (h quadletHandlers) removeMany(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Quadlets []string `query:"quadlets"`
		All      bool     `query:"all"`
		Force    bool     `query:"force"`
		Ignore   bool     `query:"ignore"`
	}
	reload, ok := quadletQueryInto(w, r, &q)
	if !ok {
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
	report, err := h.q.Remove(r.Context(), q.Quadlets, core.QuadletRemoveOptions{All: q.All, Force: q.Force, Ignore: q.Ignore, ReloadSystemd: reload})
	finishJSON(w, http.StatusOK, report, err)
}
