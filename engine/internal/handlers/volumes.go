package handlers

import (
	"net/http"

	"github.com/berth-project/berth/engine/internal/core"
)

type volumeHandlers struct {
	v core.Volumes
}

func (h volumeHandlers) create(w http.ResponseWriter, r *http.Request) {
	var opts core.VolumeCreateOptions
	if err := decodeStrict(r, &opts); err != nil {
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

type volumeRemoveQuery struct {
	Force bool `query:"force"`
	// Timeout (podman volume rm -f --time) stops the containers using the
	// volume before they are killed.
	Timeout string `query:"timeout"`
}

func (h volumeHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q volumeRemoveQuery
	if !queryInto(w, r, &q) {
		return
	}
	timeout, err := optionalUint("timeout", q.Timeout)
	if err != nil {
		writeError(w, err)
		return
	}
	if q.Force && timeout != nil {
		err = h.v.RemoveForced(r.Context(), pathParam(r, "name"), *timeout)
	} else {
		err = h.v.Remove(r.Context(), pathParam(r, "name"), q.Force)
	}
	finishNoContent(w, err)
}

// export answers the volume's content as a tar.
func (h volumeHandlers) export(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "name")
	if _, err := h.v.Inspect(r.Context(), name); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	// Once the tar streams, a failure can only cut it short.
	_ = h.v.Export(r.Context(), name, w)
}

// importTar merges the tar in the body into the volume: 204, or 400 for a
// malformed tar or one whose entries leave the volume (nothing imported).
func (h volumeHandlers) importTar(w http.ResponseWriter, r *http.Request) {
	finishNoContent(w, h.v.Import(r.Context(), pathParam(r, "name"), r.Body))
}

// volumePruneQuery are PruneVolumes' parameters.
type volumePruneQuery struct {
	Filters map[string][]string `query:"filters"`
	// DryRun (Podman 6's --dry-run) lists what would go, removing nothing.
	DryRun bool `query:"dryrun"`
}

func (h volumeHandlers) prune(w http.ResponseWriter, r *http.Request) {
	var q volumePruneQuery
	if !queryInto(w, r, &q) {
		return
	}
	prune := h.v.Prune
	if q.DryRun {
		prune = h.v.PruneDryRun
	}
	out, err := prune(r.Context(), q.Filters)
	finishJSON(w, http.StatusOK, out, err)
}
