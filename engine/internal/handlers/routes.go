package handlers

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/api"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/shared/swagger"
)

// routes is the map of the engine API. Every libpod route is served under
// /v{version}/libpod (any version string) and unversioned /libpod. A path
// parameter written {name:.*} may contain slashes (image references); the
// slashPaths middleware makes that work for clients that do not escape them.
//
// libpodRoutes is the whole libpod surface in one table, as the Docker front
// door's routes.go is Docker's: a group is served when its backend is
// configured; the handlers live in one file per resource.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(server.RequestID)
	// Every answer, libpod's, Docker's, a 404 or a panic's, carries
	// Podman's X-Reference-Id.
	r.Use(server.ReferenceID)
	r.Use(server.Recover(s.logger, func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, errInternalPanic)
	}))
	r.Use(server.AccessLog(s.logger))
	r.Use(s.metrics.Middleware)
	r.Use(apiHeaders)

	r.Method(http.MethodGet, "/metrics", s.metrics.Handler())
	r.Method(http.MethodGet, "/healthz", server.Healthz())
	r.Method(http.MethodGet, "/readyz", server.Readyz(s.deps.Ready))
	// Docker-style clients ping at the root before choosing a prefix.
	r.Get("/_ping", s.ping)
	r.Head("/_ping", s.ping)

	r.Route("/v{version}/libpod", s.libpodRoutes)
	r.Route("/libpod", s.libpodRoutes)

	r.NotFound(s.dockerOrNotFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	s.patterns = routePatterns(r)
	return slashPaths(r)
}

// libpodRoutes registers every resource group under one prefix, each only
// when the engine was given its backend.
func (s *Server) libpodRoutes(r chi.Router) {
	r.NotFound(notFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	r.Get("/swagger", swagger.ServeSwagger(s.cfg.SwaggerSpec, api.Swagger))
	// Ping, version, info, system check, disk usage, prune.
	r.Get("/_ping", s.ping)
	r.Head("/_ping", s.ping)
	if s.deps.System != nil {
		// The Docker-shaped version report Podman clients read, Podman's
		// info document, and what images, containers and volumes take.
		r.Get("/version", getHandler(s.deps.System.Version))
		r.Get("/info", getHandler(s.deps.System.Info))
		r.Post("/system/check", s.systemCheck)
		r.Get("/system/df", getHandler(s.deps.System.DiskUsage))
		r.Post("/system/prune", s.systemPrune)
	}
	// Images: their metadata (images.go).
	if s.deps.Images != nil {
		r.Get("/images/json", s.listImages)
		r.Delete("/images/remove", s.removeImages)
		r.Post("/images/prune", s.pruneImages)
		r.Get("/images/{name:.*}/json", s.inspectImage)
		// 204, or 404 with the error body for a name that matches no image
		// (a malformed name matches none).
		r.Get("/images/{name:.*}/exists", existsHandler(s.deps.Images.Lookup, core.ErrNoSuchImage))
		r.Get("/images/{name:.*}/resolve", s.resolveImage)
		r.Get("/images/{name:.*}/tree", s.imageTree)
		r.Get("/images/{name:.*}/history", s.imageHistory)
		r.Post("/images/{name:.*}/tag", s.tagImage)
		r.Post("/images/{name:.*}/untag", s.untagImage)
		r.Delete("/images/{name:.*}", s.removeImage)
	}
	// Moving images in and out of the store (images_transfer.go): registries
	// (pull, push, search), archives (load, export), rootfs tarballs (import)
	// and other engines (scp).
	if s.deps.Transfer != nil {
		r.Post("/images/pull", s.pullImage)
		r.Post("/images/{name:.*}/push", s.pushImage)
		r.Post("/images/load", s.loadImages)
		r.Post("/local/images/load", s.loadLocalImages)
		r.Post("/images/import", s.importImage)
		r.Get("/images/{name:.*}/get", s.exportImage)
		r.Get("/images/export", s.exportImages)
		r.Post("/images/scp/{name:.*}", s.scpImage)
		r.Get("/images/search", s.searchImages)
	}
	// Manifest lists. The API version in the path picks the route forms: 3.x
	// paths get the superseded v3 forms (add, push with a destination
	// parameter, DELETE removing one instance), 4.x and later (and
	// unversioned) paths the v4 forms (PUT modify, push to
	// registry/{destination}, DELETE removing the list).
	if s.deps.Manifests != nil {
		r.Post("/manifests/create", s.createManifestFromQuery)
		r.Get("/manifests/{name:.*}/exists", s.manifestExists)
		r.Get("/manifests/{name:.*}/json", s.inspectManifest)
		r.Post("/manifests/{name:.*}/registry/{destination:.*}", v4Only(s.pushManifest))
		r.Post("/manifests/{name:.*}/add", byAPIVersion(s.addManifestV3, s.createManifestEndingIn("/add")))
		r.Post("/manifests/{name:.*}/push", byAPIVersion(s.pushManifestV3, s.createManifestEndingIn("/push")))
		r.Post("/manifests/{name:.*}", v4Only(s.createManifest))
		r.Put("/manifests/{name:.*}", v4Only(s.modifyManifest))
		r.Delete("/manifests/{name:.*}", byAPIVersion(s.removeManifestDigestV3, s.deleteManifest))
	}
	// OCI artifacts (Podman 5's artifact API).
	if s.deps.Artifacts != nil {
		r.Get("/artifacts/json", s.listArtifacts)
		r.Post("/artifacts/add", s.addArtifact)
		r.Post("/artifacts/local/add", s.addLocalArtifact)
		r.Post("/artifacts/pull", s.pullArtifact)
		r.Delete("/artifacts/remove", s.removeArtifacts)
		r.Get("/artifacts/{name:.*}/json", s.inspectArtifact)
		r.Get("/artifacts/{name:.*}/extract", s.extractArtifact)
		r.Post("/artifacts/{name:.*}/push", s.pushArtifact)
		r.Delete("/artifacts/{name:.*}", s.removeArtifact)
	}
	// Containers: the lifecycle operations (containers.go), then copying
	// files in and out (podman cp), the changes of containers and images, and
	// commit (container_files.go), each where the backend offers it.
	if c := s.deps.Containers; c != nil {
		h := containerHandlers{c: c}
		r.Post("/containers/create", h.create)
		r.Get("/containers/json", h.list)
		r.Post("/containers/prune", h.prune)
		r.Delete("/containers/{name}", h.remove)
		r.Get("/containers/{name}/json", h.inspect)
		r.Get("/containers/{name}/exists", h.exists)
		r.Post("/containers/{name}/init", h.init)
		r.Post("/containers/{name}/start", namedActionHandler(c.Start))
		r.Post("/containers/{name}/stop", h.stop)
		r.Post("/containers/{name}/kill", h.kill)
		r.Post("/containers/{name}/restart", h.restart)
		r.Post("/containers/{name}/pause", namedActionHandler(c.Pause))
		r.Post("/containers/{name}/unpause", namedActionHandler(c.Unpause))
		r.Post("/containers/{name}/wait", h.wait)
		r.Post("/containers/{name}/update", h.update)
		if mounts, ok := c.(core.ContainerMounts); ok {
			mh := mountHandlers{c: c, m: mounts}
			r.Get("/containers/showmounted", getHandler(mounts.Mounted))
			r.Post("/containers/{name}/mount", namedHandler(mounts.Mount))
			r.Post("/containers/{name}/unmount", namedActionHandler(mounts.Unmount))
			r.Post("/containers/{name}/rename", mh.rename)
		}
		if files, ok := c.(core.ContainerFilesystems); ok {
			fh := fileHandlers{f: files}
			r.Get("/containers/{name}/export", fh.export)
		}
		if ckpt, ok := c.(core.ContainerCheckpoints); ok {
			ch := checkpointHandlers{c: c, k: ckpt}
			r.Post("/containers/{name}/checkpoint", ch.checkpoint)
			r.Post("/containers/{name}/restore", ch.restore)
		}
		if a, ok := c.(core.ContainerArchives); ok {
			ah := archiveHandlers{a: a}
			r.Head("/containers/{name}/archive", ah.stat)
			r.Get("/containers/{name}/archive", ah.get)
			r.Put("/containers/{name}/archive", ah.put)
		}
		if f, ok := c.(core.ContainerFilesystems); ok {
			r.Get("/containers/{name}/changes", changesHandler(f))
			r.Get("/images/{name:.*}/changes", changesHandler(f))
		}
		if cm, ok := c.(core.ContainerCommits); ok {
			r.Post("/commit", commitHandler(cm))
		}
	}
	// Volumes.
	if v := s.deps.Volumes; v != nil {
		h := volumeHandlers{v: v}
		r.Post("/volumes/create", h.create)
		r.Get("/volumes/json", filteredHandler(v.List))
		r.Post("/volumes/prune", h.prune)
		r.Get("/volumes/{name}/json", namedHandler(v.Inspect))
		r.Get("/volumes/{name}/exists", existsHandler(v.Inspect, core.ErrNoSuchVolume))
		r.Delete("/volumes/{name}", h.remove)
		r.Get("/volumes/{name}/export", h.export)
		r.Post("/volumes/{name}/import", h.importTar)
	}
	// Secrets.
	if sec := s.deps.Secrets; sec != nil {
		h := secretHandlers{s: sec}
		r.Post("/secrets/create", h.create)
		r.Get("/secrets/json", filteredHandler(sec.List))
		r.Get("/secrets/{name}/json", h.inspect)
		r.Get("/secrets/{name}/exists", h.exists)
		r.Delete("/secrets/{name}", h.remove)
	}
	// Pods.
	if p := s.deps.Pods; p != nil {
		h := podHandlers{p: p}
		r.Post("/pods/create", h.create)
		// Podman's pod clients send one whole value per filter ("a=b"), so
		// the listing reads the filters as they come.
		r.Get("/pods/json", filteredHandler(p.List))
		r.Post("/pods/prune", getHandler(p.Prune))
		r.Get("/pods/stats", h.stats)
		r.Delete("/pods/{name}", h.remove)
		r.Get("/pods/{name}/json", namedHandler(p.Inspect))
		r.Get("/pods/{name}/exists", existsHandler(p.Inspect, core.ErrNoSuchPod))
		r.Post("/pods/{name}/start", podActionHandler(p.Start))
		r.Post("/pods/{name}/stop", timedPodActionHandler(p.Stop))
		r.Post("/pods/{name}/restart", timedPodActionHandler(p.Restart))
		r.Post("/pods/{name}/kill", h.kill)
		r.Post("/pods/{name}/pause", podActionHandler(p.Pause))
		r.Post("/pods/{name}/unpause", podActionHandler(p.Unpause))
		r.Get("/pods/{name}/top", h.top)
	}
	// Networks.
	if n := s.deps.Networks; n != nil {
		h := networkHandlers{n: n, listGzip: &gzipMemo{}}
		r.Post("/networks/create", h.create)
		r.Get("/networks/json", h.list)
		r.Post("/networks/prune", h.prune)
		r.Get("/networks/{name}/json", namedHandler(n.Inspect))
		r.Get("/networks/{name}", namedHandler(n.Inspect))
		r.Get("/networks/{name}/exists", existsHandler(n.Inspect, core.ErrNoSuchNetwork))
		r.Delete("/networks/{name}", h.remove)
		r.Post("/networks/{name}/update", h.update)
		r.Post("/networks/{name}/connect", h.connect)
		r.Post("/networks/{name}/disconnect", h.disconnect)
	}
	// A container's streams: LogsFromContainer, AttachContainer and the
	// terminal resize that attached clients call.
	if s.deps.ContainerIO != nil && s.deps.Containers != nil {
		r.Get("/containers/{name}/logs", s.containerLogs)
		r.Post("/containers/{name}/attach", s.attachContainer)
		r.Post("/containers/{name}/resize", s.resizeContainer)
	}
	// Exec create, start, inspect, resize and remove.
	if s.deps.Exec != nil && s.deps.Containers != nil {
		r.Post("/containers/{name}/exec", s.execCreate)
		r.Post("/exec/{id}/start", s.execStart)
		r.Get("/exec/{id}/json", s.execInspect)
		r.Post("/exec/{id}/resize", s.execResize)
		r.Post("/exec/{id}/remove", s.execRemove)
	}
	// StatsContainer for one or many containers, and TopContainer.
	if s.deps.ContainerIO != nil {
		r.Get("/containers/stats", s.containerStats)
		r.Get("/containers/{name}/stats", s.containerStatsDocker)
		r.Get("/containers/{name}/top", s.containerTop)
	}
	// GetEvents.
	if s.deps.Events != nil {
		r.Get("/events", s.getEvents)
	}
	// RunHealthCheck and the restart-policy question clients ask after a
	// foreground run.
	if s.deps.Containers != nil {
		r.Post("/containers/{name}/shouldrestart", s.shouldRestart)
	}
	if s.deps.Health != nil {
		// The check runs once: 200 with the result, 409 when the container
		// is not running or has no healthcheck.
		r.Get("/containers/{name}/healthcheck", namedHandler(s.deps.Health.Run))
	}
	// Builds.
	if s.deps.Build != nil {
		r.Post("/build", s.buildImage)
		r.Post("/local/build", s.buildLocal)
	}
	// Quadlets.
	if q := s.deps.Quadlets; q != nil {
		h := quadletHandlers{q: q}
		r.Post("/quadlets", h.install)
		r.Get("/quadlets/json", filteredHandler(q.List))
		r.Get("/quadlets/{name}/exists", h.exists)
		r.Get("/quadlets/{name}/file", h.print)
		r.Delete("/quadlets", h.removeMany)
		r.Delete("/quadlets/{name}", h.remove)
		// Podman's router answers 405 for the other methods on a quadlet's
		// path (it matches the path of the removal route), where the engine's
		// rule for paths ending in a parameter would answer 404.
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch} {
			r.MethodFunc(method, "/quadlets/{name}", writeMethodNotAllowed)
		}
	}
	// systemd units of containers and pods.
	if gen := s.deps.Systemd; gen != nil {
		h := generateHandlers{gen: gen}
		r.Get("/generate/{name:.*}/systemd", h.systemd)
	}
	// kube play and down.
	if k := s.deps.Kube; k != nil {
		h := kubePlayHandlers{k: k}
		r.Post("/play/kube", h.play)
		r.Post("/kube/play", h.play)
		r.Delete("/play/kube", h.down)
		r.Delete("/kube/play", h.down)
	}
	// kube generate and apply.
	if s.deps.KubeGenerator != nil {
		h := kubeGenerateHandlers{gen: s.deps.KubeGenerator, applier: s.deps.KubeApplier}
		r.Get("/generate/kube", h.generate)
		r.Get("/kube/generate", h.generate)
		if h.applier != nil {
			r.Post("/kube/apply", h.apply)
		}
	}
}

// dockerOrNotFound hands a path outside libpod's tree to the Docker
// front door: "/v1.41/containers/json" and "/containers/json" are
// Docker's, "/v4.3.1/libpod/..." and "/libpod/..." stay libpod's (and get
// its 404 here).
func (s *Server) dockerOrNotFound(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Docker == nil || isLibpodPath(r.URL.Path) {
		notFound(w, r)
		return
	}
	s.cfg.Docker.ServeHTTP(w, r)
}

// isLibpodPath: /libpod/... or /v{version}/libpod/...
func isLibpodPath(p string) bool {
	if strings.HasPrefix(p, "/libpod/") || p == "/libpod" {
		return true
	}
	if !strings.HasPrefix(p, "/v") {
		return false
	}
	_, rest, _ := strings.Cut(p[1:], "/")
	return rest == "libpod" || strings.HasPrefix(rest, "libpod/")
}
