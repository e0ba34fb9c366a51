package handlers

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/berth-project/berth/engine/internal/core"
)

type secretHandlers struct {
	s core.Secrets
}

// maxSecretBody is one byte more than the largest secret, to tell a body
// that is too large from one that fits.
const maxSecretBody = 512000

type secretCreateQuery struct {
	Name       string            `query:"name"`
	Driver     string            `query:"driver"`
	DriverOpts map[string]string `query:"driveropts"`
	Labels     map[string]string `query:"labels"`
	Replace    bool              `query:"replace"`
	Ignore     bool              `query:"ignore"`
}

// secretCreateReport is CreateSecret's answer.
type secretCreateReport struct {
	ID string `json:"ID"`
}

func (h secretHandlers) create(w http.ResponseWriter, r *http.Request) {
	var q secretCreateQuery
	if !queryInto(w, r, &q) {
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxSecretBody+1))
	if err != nil {
		writeError(w, core.InvalidArgument("body", errors.New("reading the secret data failed")))
		return
	}
	if len(data) > maxSecretBody-1 {
		writeError(w, core.InvalidArgument("body", fmt.Errorf("secret data must be larger than 0 and less than %d bytes", maxSecretBody)))
		return
	}
	id, err := h.s.Create(r.Context(), core.SecretCreateOptions{
		Name: q.Name, Driver: q.Driver, DriverOpts: q.DriverOpts,
		Labels: q.Labels, Replace: q.Replace, Ignore: q.Ignore,
	}, data)
	clear(data)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, secretCreateReport{ID: id})
}

func (h secretHandlers) inspect(w http.ResponseWriter, r *http.Request) {
	var q struct {
		ShowSecret bool `query:"showsecret"`
	}
	if !queryInto(w, r, &q) {
		return
	}
	sec, err := h.s.Inspect(r.Context(), pathParam(r, "name"), q.ShowSecret)
	finishJSON(w, http.StatusOK, sec, err)
}

func (h secretHandlers) exists(w http.ResponseWriter, r *http.Request) {
	_, err := h.s.Inspect(r.Context(), pathParam(r, "name"), false)
	finishNoContent(w, err)
}

func (h secretHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q struct {
		All bool `query:"all"`
	}
	if !queryInto(w, r, &q) {
		return
	}
	var err error
	if q.All {
		err = h.s.RemoveAll(r.Context())
	} else {
		err = h.s.Remove(r.Context(), pathParam(r, "name"))
	}
	finishNoContent(w, err)
}
