package dockerapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// routes is the map of Docker's Engine API as Berth serves it. Paths are
// unversioned here (versioned strips the prefix). Image names may contain
// slashes, so the image routes that take a name are one wildcard that
// imageByName splits.
func (s *server) routes() http.Handler {
	r := chi.NewRouter()
	r.NotFound(noRoute)
	r.MethodNotAllowed(methodNotAllowed)

	r.Get("/_ping", s.ping)
	r.Head("/_ping", s.ping)
	if s.deps.System != nil {
		r.Get("/version", s.version)
		r.Get("/info", s.info)
		r.Get("/system/df", s.diskUsage)
	}
	r.Post("/auth", s.auth)
	if s.deps.Events != nil {
		r.Get("/events", s.events)
	}

	if c := s.deps.Containers; c != nil {
		r.Post("/containers/create", s.containerCreate)
		r.Get("/containers/json", s.containerList)
		r.Post("/containers/prune", s.containerPrune)
		r.Get("/containers/{name}/json", s.containerInspect)
		r.Delete("/containers/{name}", s.containerRemove)
		r.Post("/containers/{name}/start", s.containerStart)
		r.Post("/containers/{name}/stop", s.containerStop)
		r.Post("/containers/{name}/restart", s.containerRestart)
		r.Post("/containers/{name}/kill", s.containerKill)
		r.Post("/containers/{name}/pause", s.containerPause)
		r.Post("/containers/{name}/unpause", s.containerUnpause)
		r.Post("/containers/{name}/wait", s.containerWait)
		r.Post("/containers/{name}/rename", s.containerRename)
		r.Post("/containers/{name}/update", s.containerUpdate)
		r.Get("/containers/{name}/changes", s.containerChanges)
		r.Get("/containers/{name}/export", s.containerExport)
		r.Head("/containers/{name}/archive", s.archiveStat)
		r.Get("/containers/{name}/archive", s.archiveGet)
		r.Put("/containers/{name}/archive", s.archivePut)
		r.Post("/commit", s.commit)
		if s.deps.ContainerIO != nil {
			r.Post("/containers/{name}/attach", s.containerAttach)
			r.Post("/containers/{name}/resize", s.containerResize)
			r.Get("/containers/{name}/logs", s.containerLogs)
			r.Get("/containers/{name}/stats", s.containerStats)
			r.Get("/containers/{name}/top", s.containerTop)
		}
		if s.deps.Exec != nil {
			r.Post("/containers/{name}/exec", s.execCreate)
			r.Post("/exec/{id}/start", s.execStart)
			r.Post("/exec/{id}/resize", s.execResize)
			r.Get("/exec/{id}/json", s.execInspect)
		}
	}

	if s.deps.Images != nil {
		r.Get("/images/json", s.imageList)
		r.Post("/images/create", s.imageCreate)
		r.Post("/images/load", s.imageLoad)
		r.Get("/images/get", s.imageGetMany)
		r.Post("/images/prune", s.imagePrune)
		r.Get("/images/search", s.imageSearch)
		r.Get("/distribution/*", s.distributionInspect)
		r.HandleFunc("/images/*", s.imageByName)
		if s.deps.Build != nil {
			r.Post("/build", s.build)
			r.Post("/build/prune", s.buildPrune)
		}
	}

	if s.deps.Networks != nil {
		r.Get("/networks", s.networkList)
		r.Get("/networks/", s.networkList)
		r.Post("/networks/create", s.networkCreate)
		r.Post("/networks/prune", s.networkPrune)
		r.Get("/networks/{name}", s.networkInspect)
		r.Delete("/networks/{name}", s.networkRemove)
		r.Post("/networks/{name}/connect", s.networkConnect)
		r.Post("/networks/{name}/disconnect", s.networkDisconnect)
	}

	if s.deps.Volumes != nil {
		r.Get("/volumes", s.volumeList)
		r.Post("/volumes/create", s.volumeCreate)
		r.Post("/volumes/prune", s.volumePrune)
		r.Get("/volumes/{name}", s.volumeInspect)
		r.Delete("/volumes/{name}", s.volumeRemove)
	}

	// Swarm and plugins are not Berth's: answer as Podman does, 503 naming
	// them, so clients report "not a swarm manager" rather than a bad route.
	for _, prefix := range []string{"/swarm", "/nodes", "/services", "/tasks", "/secrets", "/configs"} {
		r.HandleFunc(prefix, swarmUnavailable)
		r.HandleFunc(prefix+"/*", swarmUnavailable)
	}
	r.Get("/plugins/{name}/json", pluginNotFound)
	r.HandleFunc("/plugins", pluginsUnavailable)
	r.HandleFunc("/plugins/*", pluginsUnavailable)
	return r
}

// swarmUnavailable answers the swarm routes.
func swarmUnavailable(w http.ResponseWriter, r *http.Request) {
	writeMessage(w, http.StatusServiceUnavailable, "This node is not a swarm manager. Berth does not support swarm mode ("+r.URL.Path+").")
}

// pluginsUnavailable answers the plugin routes.
func pluginsUnavailable(w http.ResponseWriter, r *http.Request) {
	writeMessage(w, http.StatusServiceUnavailable, "Berth does not support Docker plugins ("+r.URL.Path+").")
}

// pluginNotFound answers a plugin inspect: no plugin exists (docker
// inspect without --type asks for one after containers, images ...).
func pluginNotFound(w http.ResponseWriter, r *http.Request) {
	writeMessage(w, http.StatusNotFound, "plugin \""+chi.URLParam(r, "name")+"\" not found")
}
