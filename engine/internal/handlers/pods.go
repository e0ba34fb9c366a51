package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

type podHandlers struct {
	p core.Pods
}

// idResponse is the answer of PodCreate.
type idResponse struct {
	ID string `json:"Id"`
}

func (h podHandlers) create(w http.ResponseWriter, r *http.Request) {
	spec, err := decodePodSpec(r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	id, err := h.p.Create(r.Context(), spec)
	finishJSON(w, http.StatusCreated, idResponse{ID: id}, err)
}

type podStatsQuery struct {
	All        bool     `query:"all"`
	NamesOrIDs []string `query:"namesOrIDs"`
	Stream     bool     `query:"stream"`
	Delay      int      `query:"delay"`
}

// stats answers one sample of the pods' containers, or, with stream, one
// JSON array every delay seconds (Podman's default 5) until the client goes.
func (h podHandlers) stats(w http.ResponseWriter, r *http.Request) {
	q := podStatsQuery{Delay: 5}
	if !queryInto(w, r, &q) {
		return
	}
	if !intervalValid(w, "delay", int64(q.Delay)) {
		return
	}
	reports, err := h.p.Stats(r.Context(), q.All, q.NamesOrIDs)
	if err != nil || !q.Stream {
		finishJSON(w, http.StatusOK, reports, err)
		return
	}
	// A pod removed meanwhile ends the stream, as in Podman.
	_ = httpwire.StreamReports(w, r.Context(), reports, true, time.Duration(q.Delay)*time.Second, func([]core.PodStatsReport) ([]core.PodStatsReport, error) {
		return h.p.Stats(r.Context(), q.All, q.NamesOrIDs)
	}, func(reports []core.PodStatsReport) any { return reports })
}

func (h podHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q forceRemoveQuery
	timeout, ok := timedQueryInto(w, r, &q)
	if !ok {
		return
	}
	report, err := h.p.Remove(r.Context(), pathParam(r, "name"), core.RemovePodOptions{Force: q.Force, Timeout: timeout})
	finishJSON(w, http.StatusOK, report, err)
}

// finishPodAction answers a lifecycle report: 200, or 409 with the report
// when some container failed (what Podman answers), or the error.
func finishPodAction(w http.ResponseWriter, report *core.PodActionReport, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if len(report.Errs) > 0 {
		status = http.StatusConflict
	}
	writeJSON(w, status, report)
}

// podActionHandler answers a pod action that takes only the pod's name
// (start, pause, unpause).
func podActionHandler(action func(ctx context.Context, nameOrID string) (*core.PodActionReport, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		report, err := action(r.Context(), pathParam(r, "name"))
		finishPodAction(w, report, err)
	}
}

// timedPodActionHandler answers a pod action that takes the stop timeout
// (stop, restart).
func timedPodActionHandler(action func(ctx context.Context, nameOrID string, timeout *uint) (*core.PodActionReport, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, timeout, ok := stopQueryInto(w, r)
		if !ok {
			return
		}
		report, err := action(r.Context(), pathParam(r, "name"), timeout)
		finishPodAction(w, report, err)
	}
}

func (h podHandlers) kill(w http.ResponseWriter, r *http.Request) {
	q := killQuery{Signal: "SIGKILL"}
	if !queryInto(w, r, &q) {
		return
	}
	report, err := h.p.Kill(r.Context(), pathParam(r, "name"), q.Signal)
	finishPodAction(w, report, err)
}

type podTopQuery struct {
	PsArgs []string `query:"ps_args"`
}

func (h podHandlers) top(w http.ResponseWriter, r *http.Request) {
	var q podTopQuery
	if !queryInto(w, r, &q) {
		return
	}
	report, err := h.p.Top(r.Context(), pathParam(r, "name"), q.PsArgs)
	finishJSON(w, http.StatusOK, report, err)
}

// decodePodSpec reads a PodCreate body with the engine's JSON body rules
// (size bound, one value, type errors naming the member) and refuses
// members the engine does not know with a 400 naming them; the pods backend
// checks the known ones.
func decodePodSpec(body io.Reader) (core.PodSpec, error) {
	var spec core.PodSpec
	dec := json.NewDecoder(&boundedBody{r: body, left: maxJSONBody})
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			if field = strings.Trim(field, `"`); field == "" {
				field = "body"
			}
			return spec, core.InvalidArgument(field, errors.New("is not a pod creation option this engine knows"))
		}
		return spec, bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return spec, bodyError(errors.New("unexpected data after the JSON value"))
	}
	return spec, nil
}
