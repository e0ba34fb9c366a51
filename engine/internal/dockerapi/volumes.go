package dockerapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	volumetypes "github.com/docker/docker/api/types/volume"

	"github.com/berth-project/berth/engine/internal/core"
)

// dockerVolume is a volume as Docker shows it.
func dockerVolume(v *core.Volume) *volumetypes.Volume {
	out := &volumetypes.Volume{
		Name: v.Name, Driver: firstNonEmpty(v.Driver, "local"), Mountpoint: v.Mountpoint,
		CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339), Labels: v.Labels, Scope: "local", Options: v.Options,
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if out.Options == nil {
		out.Options = map[string]string{}
	}
	return out
}

// volumeList answers docker volume ls.
func (s *server) volumeList(w http.ResponseWriter, r *http.Request) {
	f, ok := filtersOf(w, r)
	if !ok {
		return
	}
	list, err := s.deps.Volumes.List(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	out := volumetypes.ListResponse{Volumes: []*volumetypes.Volume{}, Warnings: []string{}}
	for _, v := range list {
		out.Volumes = append(out.Volumes, dockerVolume(v))
	}
	writeJSON(w, http.StatusOK, out)
}

// volumeCreate answers docker volume create; an existing name answers the
// existing volume, as Docker does.
func (s *server) volumeCreate(w http.ResponseWriter, r *http.Request) {
	var req volumetypes.CreateOptions
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Driver != "" && req.Driver != "local" {
		writeError(w, core.InvalidArgument("Driver", fmt.Errorf("volume driver %q is not supported (local)", req.Driver)))
		return
	}
	if req.ClusterVolumeSpec != nil {
		writeError(w, core.InvalidArgument("ClusterVolumeSpec", errors.New("cluster volumes are not supported")))
		return
	}
	if req.Name != "" {
		if v, err := s.deps.Volumes.Inspect(r.Context(), req.Name); err == nil {
			writeJSON(w, http.StatusCreated, dockerVolume(v))
			return
		}
	}
	// A volume created without a name is anonymous, as dockerd (23 on)
	// makes it: a prune without all=true removes it.
	v, err := s.deps.Volumes.Create(r.Context(), core.VolumeCreateOptions{Name: req.Name, Driver: "local", Labels: req.Labels, Options: req.DriverOpts,
		Anonymous: req.Name == ""})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, dockerVolume(v))
}

// volumeInspect answers docker volume inspect.
func (s *server) volumeInspect(w http.ResponseWriter, r *http.Request) {
	v, err := s.deps.Volumes.Inspect(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, dockerVolume(v))
}

// volumeRemove answers docker volume rm. As dockerd's, force removes no
// container: it answers a missing volume as removed, and a volume in use
// is refused in dockerd's words, which name the containers.
func (s *server) volumeRemove(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "name")
	err := s.deps.Volumes.Remove(r.Context(), name, false)
	switch {
	case errors.Is(err, core.ErrNoSuchVolume) && queryOf(r).boolean("force", false):
		err = nil
	case errors.Is(err, core.ErrVolumeInUse):
		var ids []string
		if s.deps.Containers != nil {
			users, _ := s.deps.Containers.List(r.Context(), core.ListContainersOptions{All: true, Filters: map[string][]string{"volume": {name}}})
			for _, c := range users {
				ids = append(ids, c.ID)
			}
		}
		writeMessage(w, http.StatusConflict, fmt.Sprintf("remove %s: volume is in use - [%s]", name, strings.Join(ids, ", ")))
		return
	}
	finishStatus(w, http.StatusNoContent, err)
}

// volumePrune answers docker volume prune. Docker (API 1.42+) prunes only
// anonymous volumes unless all=true is given as a filter.
func (s *server) volumePrune(w http.ResponseWriter, r *http.Request) {
	f, ok := filtersOf(w, r)
	if !ok {
		return
	}
	if f == nil {
		f = map[string][]string{}
	}
	all := versionBefore(r, "1.42")
	if v, ok := f["all"]; ok {
		all = len(v) > 0 && (v[0] == "true" || v[0] == "1")
		delete(f, "all")
	}
	out := volumetypes.PruneReport{VolumesDeleted: []string{}}
	if !all {
		// Only anonymous volumes: named ones stay unless all=true.
		list, err := s.deps.Volumes.List(r.Context(), f)
		if err != nil {
			writeError(w, err)
			return
		}
		for _, v := range list {
			if !v.Anonymous {
				continue
			}
			if err := s.deps.Volumes.Remove(r.Context(), v.Name, false); err != nil {
				if errors.Is(err, core.ErrVolumeInUse) || errors.Is(err, core.ErrNoSuchVolume) {
					continue
				}
				writeError(w, err)
				return
			}
			out.VolumesDeleted = append(out.VolumesDeleted, v.Name)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	reports, err := s.deps.Volumes.Prune(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, p := range reports {
		if p.Err == "" {
			out.VolumesDeleted = append(out.VolumesDeleted, p.ID)
			out.SpaceReclaimed += p.Size
		}
	}
	writeJSON(w, http.StatusOK, out)
}
