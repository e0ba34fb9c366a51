package handlers

import (
	"errors"
	"net/http"

	"github.com/berth-project/berth/engine/internal/core"
)

type generateHandlers struct {
	gen core.SystemdGenerator
}

// systemd answers GenerateSystemd: the units keyed by name.
func (h generateHandlers) systemd(w http.ResponseWriter, r *http.Request) {
	q := struct {
		UseName         bool     `query:"usename"`
		New             bool     `query:"new"`
		NoHeader        bool     `query:"noheader"`
		Template        bool     `query:"templateunitfile"`
		RestartPolicy   string   `query:"restartpolicy"`
		RestartSec      uint64   `query:"restartsec"`
		StartTimeout    uint64   `query:"starttimeout"`
		StopTimeout     uint64   `query:"stoptimeout"`
		ContainerPrefix string   `query:"containerprefix"`
		PodPrefix       string   `query:"podprefix"`
		Separator       string   `query:"separator"`
		Wants           []string `query:"wants"`
		After           []string `query:"after"`
		Requires        []string `query:"requires"`
		AdditionalEnv   []string `query:"additionalenvvariables"`
	}{StopTimeout: 10, ContainerPrefix: "container", PodPrefix: "pod", Separator: "-"}
	// Podman's bindings send the names lowercased (usename), its server
	// matches them without case: so does this one.
	if !queryInto(w, r, &q) {
		return
	}
	if q.Template {
		writeError(w, core.InvalidArgument("templateUnitFile", errors.New("template units are not supported yet")))
		return
	}
	units, err := h.gen.GenerateSystemd(r.Context(), pathParam(r, "name"), core.SystemdOptions{
		UseName: q.UseName, New: q.New, NoHeader: q.NoHeader,
		RestartPolicy: q.RestartPolicy, RestartSec: uint(q.RestartSec),
		StartTimeout: uint(q.StartTimeout), StopTimeout: uint(q.StopTimeout),
		ContainerPrefix: q.ContainerPrefix, PodPrefix: q.PodPrefix, Separator: q.Separator,
		Wants: q.Wants, After: q.After, Requires: q.Requires, AdditionalEnv: q.AdditionalEnv,
	})
	finishJSON(w, http.StatusOK, units, err)
}
