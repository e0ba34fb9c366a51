package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// buildahVersion is reported in Libpod-Buildah-Version; clients only show it.
const buildahVersion = "1.42.0"

// apiHeaders sets the version headers every libpod answer carries; clients
// read them from _ping to decide what the server supports.
func apiHeaders(next http.Handler) http.Handler {
	server := fmt.Sprintf("Libpod/%s (%s)", core.APIVersion, runtime.GOOS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Api-Version", core.CompatAPIVersion)
		h.Set("Libpod-Api-Version", core.APIVersion)
		h.Set("Server", server)
		next.ServeHTTP(w, r)
	})
}

// ping answers GET and HEAD _ping with "OK" and the version headers.
func (s *Server) ping(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Libpod-Buildah-Version", buildahVersion)
	h.Set("BuildKit-Version", "")
	h.Set("Docker-Experimental", "true")
	h.Set("Cache-Control", "no-cache")
	// Docker clients ping the unversioned path, served here: the docker CLI
	// reads the server's OS from this header (without it, it refuses
	// --device: "unknown server OS") and the classic builder from the next.
	h.Set("Ostype", runtime.GOOS)
	h.Set("Builder-Version", "1")
	httpwire.Pong(w, r)
}

// systemCheck checks (and with repair, repairs) the store.
func (s *Server) systemCheck(w http.ResponseWriter, r *http.Request) {
	query := struct {
		Quick       bool   `query:"quick"`
		Repair      bool   `query:"repair"`
		RepairLossy bool   `query:"repair_lossy"`
		MaxAge      string `query:"unreferenced_layer_max_age"`
	}{}
	if !queryInto(w, r, &query) {
		return
	}
	opts := core.SystemCheckOptions{Quick: query.Quick, Repair: query.Repair, RepairLossy: query.RepairLossy}
	if query.MaxAge != "" {
		age, err := time.ParseDuration(query.MaxAge)
		if err != nil || age < 0 {
			writeError(w, core.InvalidArgument("unreferenced_layer_max_age", fmt.Errorf("%q is not a duration", query.MaxAge)))
			return
		}
		opts.UnreferencedLayerMaximumAge = &age
	}
	report, err := s.deps.System.Check(r.Context(), opts)
	finishJSON(w, http.StatusOK, report, err)
}

// systemPrune removes unused objects of every kind (podman system prune).
// build=true asks for build containers to go too; the engine never makes
// any, so there is nothing more to remove. external (containers of other
// tools in the store) is refused.
func (s *Server) systemPrune(w http.ResponseWriter, r *http.Request) {
	query := struct {
		All      bool                `query:"all"`
		Volumes  bool                `query:"volumes"`
		Build    bool                `query:"build"`
		External bool                `query:"external"`
		Filters  map[string][]string `query:"filters"`
	}{}
	if !queryInto(w, r, &query) {
		return
	}
	if query.External {
		writeError(w, core.InvalidArgument("external", errors.New("pruning containers of other tools is not supported")))
		return
	}
	report, err := s.deps.System.Prune(r.Context(), core.SystemPruneOptions{
		All:     query.All,
		Volumes: query.Volumes,
		Filters: filtersForClient(r, query.Filters),
	})
	finishJSON(w, http.StatusOK, report, err)
}
