package dockerapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	containertypes "github.com/docker/docker/api/types/container"
	imagetypes "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/api/types/storage"
	"github.com/docker/go-connections/nat"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// imageList answers docker images.
func (s *server) imageList(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	opts := core.ImageListOptions{All: q.boolean("all", false), Filters: q.filters()}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	if f := q.str("filter"); f != "" {
		if opts.Filters == nil {
			opts.Filters = map[string][]string{}
		}
		opts.Filters["reference"] = append(opts.Filters["reference"], f)
	}
	list, err := s.deps.Images.List(r.Context(), opts)
	if err != nil {
		writeError(w, err)
		return
	}
	// dockerd computes a shared size only when asked (API 1.42), and the
	// containers of an image not before API 1.51: -1 stands for "not
	// computed", which the docker CLI shows as N/A.
	sharedSize := !versionBefore(r, "1.42") && q.boolean("shared-size", false)
	patterns := opts.Filters["reference"]
	out := make([]imagetypes.Summary, 0, len(list))
	for _, im := range list {
		sum := imagetypes.Summary{
			ID: imageID(im.ID), ParentID: imageID(im.ParentID),
			RepoTags: familiarImageNames(im.RepoTags), RepoDigests: familiarImageNames(im.RepoDigests),
			Created: im.Created, Size: im.Size, SharedSize: -1, Labels: im.Labels, Containers: -1,
		}
		if sharedSize {
			sum.SharedSize = int64(im.SharedSize)
		}
		if len(patterns) > 0 {
			// As dockerd, a reference filter shows only the names it
			// matches, and no image where it matches none.
			sum.RepoTags, sum.RepoDigests = matchingImageNames(sum.RepoTags, patterns), matchingImageNames(sum.RepoDigests, patterns)
			if len(sum.RepoTags) == 0 && len(sum.RepoDigests) == 0 {
				continue
			}
		}
		if versionBefore(r, "1.43") && len(sum.RepoTags) == 0 && len(sum.RepoDigests) == 0 {
			sum.RepoTags, sum.RepoDigests = []string{"<none>:<none>"}, []string{"<none>@<none>"}
		}
		if versionBefore(r, "1.44") {
			sum.VirtualSize = im.Size
		}
		out = append(out, sum)
	}
	writeJSON(w, http.StatusOK, out)
}

// imageByName serves the image routes whose name may contain slashes:
// GET {name}/json, {name}/history, {name}/get; POST {name}/tag,
// {name}/push; DELETE {name}.
func (s *server) imageByName(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/images/")
	if r.URL.RawPath != "" {
		rest = strings.TrimPrefix(r.URL.RawPath, "/images/")
	}
	if r.Method == http.MethodDelete {
		s.imageRemove(w, r, unescape(rest))
		return
	}
	name, action, ok := cutLast(rest)
	if !ok || name == "" {
		noRoute(w, r)
		return
	}
	name = unescape(name)
	switch {
	case r.Method == http.MethodGet && action == "json":
		s.imageInspect(w, r, name)
	case r.Method == http.MethodGet && action == "history":
		s.imageHistory(w, r, name)
	case r.Method == http.MethodGet && action == "get":
		s.imageGet(w, r, []string{name})
	case r.Method == http.MethodPost && action == "tag":
		s.imageTag(w, r, name)
	case r.Method == http.MethodPost && action == "push":
		s.imagePush(w, r, name)
	default:
		noRoute(w, r)
	}
}

func cutLast(p string) (string, string, bool) {
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return "", "", false
	}
	return p[:i], p[i+1:], true
}

func unescape(p string) string {
	return strings.ReplaceAll(strings.ReplaceAll(p, "%2F", "/"), "%2f", "/")
}

// imageInspectAnswer is dockerd's image inspect answer before API 1.50:
// its Config has every key of a container's configuration, empty ones
// included ("User": "", "Entrypoint": null ...), which templates such as
// `docker image inspect -f '{{.Config.User}}'` and clients reading the
// keys expect; before API 1.45 Container is there too, empty for an image
// no container was committed to.
type imageInspectAnswer struct {
	imagetypes.InspectResponse
	Config    *containertypes.Config
	Container *string `json:",omitempty"`
}

// imageInspect answers docker image inspect.
func (s *server) imageInspect(w http.ResponseWriter, r *http.Request, name string) {
	im, err := s.deps.Images.Lookup(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	cfg := im.Config
	out := imageInspectAnswer{InspectResponse: imagetypes.InspectResponse{
		ID:           imageID(im.ID),
		RepoTags:     familiarImageNames(im.RepoTags),
		RepoDigests:  familiarImageNames(im.RepoDigests),
		Parent:       imageID(im.Parent),
		Created:      im.Created.UTC().Format(time.RFC3339Nano),
		Author:       cfg.Author,
		Architecture: cfg.Architecture,
		Variant:      cfg.Variant,
		Os:           cfg.OS,
		Size:         im.Size,
		GraphDriver:  storage.DriverData{Name: im.GraphDriver.Name, Data: im.GraphDriver.Data},
		RootFS:       imagetypes.RootFS{Type: "layers"},
	}, Config: dockerImageConfig(cfg.Config, im.HealthCheck)}
	for _, d := range cfg.RootFS.DiffIDs {
		out.RootFS.Layers = append(out.RootFS.Layers, d.String())
	}
	if n := len(cfg.History); n > 0 {
		out.Comment = cfg.History[n-1].Comment
	}
	if versionBefore(r, "1.44") {
		out.VirtualSize = im.Size
	}
	if versionBefore(r, "1.45") {
		// Before 1.45 dockerd always answers the (empty for every image it
		// did not build with its classic builder) ContainerConfig; Compose
		// v1 reads its Volumes when it recreates a container.
		out.ContainerConfig = &containertypes.Config{}
		out.Container = new(string)
	}
	writeJSON(w, http.StatusOK, out)
}

// dockerImageConfig is an image's runtime configuration in the shape of
// a container's, as dockerd answers it.
func dockerImageConfig(c ocispec.ImageConfig, hc *core.HealthConfig) *containertypes.Config {
	out := &containertypes.Config{User: c.User, Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Volumes: c.Volumes,
		WorkingDir: c.WorkingDir, Labels: c.Labels, StopSignal: c.StopSignal, ArgsEscaped: c.ArgsEscaped}
	if len(c.ExposedPorts) > 0 {
		out.ExposedPorts = nat.PortSet{}
		for p := range c.ExposedPorts {
			out.ExposedPorts[nat.Port(p)] = struct{}{}
		}
	}
	if hc != nil {
		out.Healthcheck = &containertypes.HealthConfig{Test: hc.Test, Interval: hc.Interval, Timeout: hc.Timeout, StartPeriod: hc.StartPeriod, Retries: hc.Retries}
	}
	return out
}

// imageHistory answers docker history.
func (s *server) imageHistory(w http.ResponseWriter, r *http.Request, name string) {
	hist, err := s.deps.Images.History(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]imagetypes.HistoryResponseItem, 0, len(hist))
	for _, h := range hist {
		id := h.ID
		if id != "<missing>" {
			id = imageID(id)
		}
		// As dockerd, a step that made a local image carries that image's
		// tags (storage's layer names, which Podman shows, are not tags).
		tags := []string{}
		if id != "<missing>" {
			if im, err := s.deps.Images.Lookup(r.Context(), id); err == nil {
				tags = familiarImageNames(im.RepoTags)
			}
		}
		out = append(out, imagetypes.HistoryResponseItem{ID: id, Created: h.Created.Unix(), CreatedBy: h.CreatedBy, Tags: tags, Size: h.Size, Comment: h.Comment})
	}
	writeJSON(w, http.StatusOK, out)
}

// imageTag answers docker tag.
func (s *server) imageTag(w http.ResponseWriter, r *http.Request, name string) {
	q := queryOf(r)
	repo, tag := q.str("repo"), q.str("tag")
	if repo == "" {
		writeError(w, core.InvalidArgument("repo", errors.New("a repository is required")))
		return
	}
	if tag == "" {
		tag = "latest"
	}
	finishStatus(w, http.StatusCreated, s.deps.Images.Tag(r.Context(), name, repo, tag))
}

// imageRemove answers docker rmi. Its force is Docker's: it never removes
// containers (Podman's does); an image containers use loses its name and
// stays for them. An image a running container uses is not removed by ID
// even with force, as dockerd refuses it.
func (s *server) imageRemove(w http.ResponseWriter, r *http.Request, name string) {
	q := queryOf(r)
	force := q.boolean("force", false)
	if force {
		if msg := s.runningUserConflict(r, name); msg != "" {
			writeMessage(w, http.StatusConflict, msg)
			return
		}
	}
	rep, errs := s.deps.Images.Remove(r.Context(), []string{name}, core.ImageRemoveOptions{
		Force: force, NoPrune: q.boolean("noprune", false), KeepContainers: true})
	if len(errs) > 0 {
		if errors.Is(errs[0], core.ErrImageInUse) {
			if msg := s.removeConflict(r, name); msg != "" {
				writeMessage(w, http.StatusConflict, msg)
				return
			}
		}
		writeError(w, errs[0])
		return
	}
	out := []imagetypes.DeleteResponse{}
	for _, u := range rep.Untagged {
		out = append(out, imagetypes.DeleteResponse{Untagged: familiarImageName(u)})
	}
	// As dockerd: each image deleted, then the layers that went with it.
	for _, d := range rep.DockerDeleted {
		out = append(out, imagetypes.DeleteResponse{Deleted: imageID(d)})
	}
	writeJSON(w, http.StatusOK, out)
}

// imageUser is a container that uses an image.
type imageUser struct {
	id      string
	running bool
}

// imageUsers are the image name names and the containers that use it,
// running ones first.
func (s *server) imageUsers(r *http.Request, name string) (*core.Image, []imageUser, error) {
	im, err := s.deps.Images.Lookup(r.Context(), name)
	if err != nil || s.deps.Containers == nil {
		return nil, nil, err
	}
	list, err := s.deps.Containers.List(r.Context(), core.ListContainersOptions{All: true})
	if err != nil {
		return nil, nil, err
	}
	var users []imageUser
	for _, c := range list {
		if strings.TrimPrefix(c.ImageID, "sha256:") == im.ID {
			users = append(users, imageUser{id: c.ID, running: c.State == "running" || c.State == "paused"})
		}
	}
	sort.SliceStable(users, func(i, j int) bool { return users[i].running && !users[j].running })
	return im, users, nil
}

// isImageIDPrefix reports whether name names image id by its ID.
func isImageIDPrefix(id, name string) bool {
	name = strings.TrimPrefix(name, "sha256:")
	return name != "" && strings.HasPrefix(id, name) && strings.Trim(name, "0123456789abcdef") == ""
}

// runningUserConflict is dockerd's refusal of a forced removal by ID of
// an image a running container uses, or "".
func (s *server) runningUserConflict(r *http.Request, name string) string {
	im, users, err := s.imageUsers(r, name)
	if err != nil || im == nil || !isImageIDPrefix(im.ID, name) || len(users) == 0 || !users[0].running {
		return ""
	}
	return fmt.Sprintf("conflict: unable to delete %s (cannot be forced) - image is being used by running container %s",
		shortDigest(im.ID), shortDigest(users[0].id))
}

// removeConflict words a refused removal as dockerd does: by ID, "unable
// to delete ... (must be forced)" (or "cannot be forced" for a running
// container) with the reason; by name, "unable to remove repository
// reference"; "" where the image or its users cannot be read.
func (s *server) removeConflict(r *http.Request, name string) string {
	im, users, err := s.imageUsers(r, name)
	if err != nil || im == nil {
		return ""
	}
	if !isImageIDPrefix(im.ID, name) {
		if len(users) == 0 {
			return ""
		}
		return fmt.Sprintf("conflict: unable to remove repository reference %q (must force) - container %s is using its referenced image %s",
			name, shortDigest(users[0].id), shortDigest(im.ID))
	}
	reason, forced := "image is referenced in multiple repositories", "must be forced"
	if len(users) > 0 {
		state := "stopped"
		if users[0].running {
			state, forced = "running", "cannot be forced"
		}
		reason = fmt.Sprintf("image is being used by %s container %s", state, shortDigest(users[0].id))
	}
	return fmt.Sprintf("conflict: unable to delete %s (%s) - %s", shortDigest(im.ID), forced, reason)
}

// imagePrune answers docker image prune.
func (s *server) imagePrune(w http.ResponseWriter, r *http.Request) {
	f, ok := filtersOf(w, r)
	if !ok {
		return
	}
	opts := core.ImagePruneOptions{Filters: f}
	if d, ok := f["dangling"]; ok {
		opts.All = len(d) == 1 && (d[0] == "false" || d[0] == "0")
		delete(f, "dangling")
	}
	reports, err := s.deps.Images.Prune(r.Context(), opts)
	if err != nil {
		writeError(w, err)
		return
	}
	out := imagetypes.PruneReport{ImagesDeleted: []imagetypes.DeleteResponse{}}
	for _, p := range reports {
		if p.Err != "" {
			continue
		}
		out.ImagesDeleted = append(out.ImagesDeleted, imagetypes.DeleteResponse{Deleted: imageID(p.ID)})
		out.SpaceReclaimed += p.Size
	}
	writeJSON(w, http.StatusOK, out)
}

// imageSearch serves GET /images/search (docker search) over the same
// search as podman's: term, limit (dockerd's range 1-100, default 25) and
// the stars, is-official and is-automated filters. A registry on a loopback
// address is searched without TLS verification, as dockerd's default
// insecure registries are. Nothing found is an empty list, as dockerd
// answers.
func (s *server) imageSearch(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	term := q.str("term")
	limit := q.integer("limit", 0)
	raw := q.filters()
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	if term == "" {
		writeError(w, core.InvalidArgument("term", errors.New("a search term is required")))
		return
	}
	filters, err := core.ParseSearchFilters(raw)
	if err != nil {
		writeError(w, err)
		return
	}
	auth, err := registryAuthHeader(r)
	if err != nil {
		writeError(w, err)
		return
	}
	found, err := s.deps.Transfer.Search(r.Context(), core.SearchOptions{Term: term, Limit: int(limit), Filters: filters,
		TLSVerify: dockerTLSVerify(term), Auth: auth})
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]registry.SearchResult, 0, len(found))
	for _, f := range found {
		out = append(out, registry.SearchResult{Name: f.Name, Description: f.Description, StarCount: f.Stars,
			IsOfficial: f.Official, IsAutomated: f.Automated})
	}
	writeJSON(w, http.StatusOK, out)
}

// distributionInspect serves GET /distribution/{name}/json: the registry's
// manifest descriptor for name and the platforms it offers, read without
// pulling (a loopback registry without TLS verification, as dockerd).
func (s *server) distributionInspect(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if r.URL.RawPath != "" {
		p = r.URL.RawPath
	}
	_, rest, _ := strings.Cut(p, "/distribution/")
	name, ok := strings.CutSuffix(rest, "/json")
	if !ok || name == "" {
		noRoute(w, r)
		return
	}
	name = unescape(name)
	auth, err := registryAuthHeader(r)
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := s.deps.Transfer.Distribution(r.Context(), name, core.DistributionOptions{TLSVerify: dockerTLSVerify(name), Auth: auth})
	if err != nil {
		writeError(w, err)
		return
	}
	out := registry.DistributionInspect{Descriptor: ocispec.Descriptor{MediaType: d.MediaType, Digest: digest.Digest(d.Digest), Size: d.Size},
		Platforms: make([]ocispec.Platform, 0, len(d.Platforms))}
	for _, p := range d.Platforms {
		out.Platforms = append(out.Platforms, ocispec.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant,
			OSVersion: p.OSVersion, OSFeatures: p.OSFeatures})
	}
	writeJSON(w, http.StatusOK, out)
}

// registryAuthHeader decodes X-Registry-Auth (base64 JSON of one login).
func registryAuthHeader(r *http.Request) (*core.RegistryAuth, error) {
	v := strings.TrimSpace(r.Header.Get("X-Registry-Auth"))
	if v == "" || v == "null" {
		return nil, nil
	}
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.URLEncoding, base64.StdEncoding, base64.RawURLEncoding, base64.RawStdEncoding} {
		if raw, err = enc.DecodeString(v); err == nil {
			break
		}
	}
	if err != nil {
		return nil, core.InvalidArgument("X-Registry-Auth", errors.New("not base64"))
	}
	var a registry.AuthConfig
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, core.InvalidArgument("X-Registry-Auth", err)
	}
	if a.Username == "" && a.Password == "" && a.IdentityToken == "" {
		return nil, nil
	}
	return &core.RegistryAuth{Default: &core.RegistryCredential{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken}}, nil
}

// progressMessage is one line of Docker's JSON progress stream.
type progressMessage struct {
	Status         string          `json:"status,omitempty"`
	ID             string          `json:"id,omitempty"`
	Progress       string          `json:"progress,omitempty"`
	ProgressDetail *progressDetail `json:"progressDetail,omitempty"`
	Stream         string          `json:"stream,omitempty"`
	Aux            any             `json:"aux,omitempty"`
	Error          string          `json:"error,omitempty"`
	ErrorDetail    *errorDetail    `json:"errorDetail,omitempty"`
}

type progressDetail struct {
	Current int64 `json:"current,omitempty"`
	Total   int64 `json:"total,omitempty"`
}

type errorDetail struct {
	Message string `json:"message"`
}

// jsonStream writes Docker's progress lines, flushing each; safe for
// concurrent senders.
type jsonStream struct {
	mu  sync.Mutex
	enc *json.Encoder
	rc  *http.ResponseController
}

func startJSONStream(w http.ResponseWriter) *jsonStream {
	enc, rc := httpwire.BeginJSONLines(w)
	return &jsonStream{enc: enc, rc: rc}
}

func (j *jsonStream) send(m progressMessage) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.enc.Encode(m)
	_ = j.rc.Flush()
}

func (j *jsonStream) fail(err error) {
	j.send(progressMessage{Error: err.Error(), ErrorDetail: &errorDetail{Message: err.Error()}})
}

// shortDigest is the 12-hex-digit ID Docker shows for a layer.
func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// imageCreate answers docker pull (fromImage) and docker import (fromSrc).
func (s *server) imageCreate(w http.ResponseWriter, r *http.Request) {
	if s.deps.Transfer == nil {
		noRoute(w, r)
		return
	}
	q := queryOf(r)
	if src := q.str("fromSrc"); src != "" {
		s.imageImport(w, r, src)
		return
	}
	from := q.str("fromImage")
	if from == "" {
		writeError(w, core.InvalidArgument("fromImage", errors.New("fromImage or fromSrc is required")))
		return
	}
	tag := q.str("tag")
	ref := from
	if tag != "" {
		sep := ":"
		if strings.HasPrefix(tag, "sha256:") {
			sep = "@"
		}
		ref = from + sep + tag
	}
	auth, err := registryAuthHeader(r)
	if err != nil {
		writeError(w, err)
		return
	}
	opts := core.PullOptions{Reference: ref, Policy: core.PullPolicy("always"), Auth: auth, TLSVerify: dockerTLSVerify(ref)}
	if p := q.str("platform"); p != "" {
		if opts.OS, opts.Arch, opts.Variant, err = core.ParsePlatform("platform", p); err != nil {
			writeError(w, err)
			return
		}
	}
	js := startJSONStream(w)
	js.send(progressMessage{Status: "Pulling from " + from, ID: firstNonEmpty(tag, "latest")})
	opts.Blobs = func(b core.BlobProgress) {
		id := shortDigest(b.Digest)
		switch b.Event {
		case core.BlobStarted:
			js.send(progressMessage{Status: "Pulling fs layer", ID: id})
		case core.BlobRead:
			js.send(progressMessage{Status: "Downloading", ID: id, ProgressDetail: &progressDetail{Current: b.Current, Total: b.Total}})
		case core.BlobDone:
			js.send(progressMessage{Status: "Pull complete", ID: id})
		case core.BlobSkipped:
			js.send(progressMessage{Status: "Already exists", ID: id})
		}
	}
	ids, err := s.deps.Transfer.Pull(r.Context(), opts)
	if err != nil {
		js.fail(err)
		return
	}
	if len(ids) > 0 {
		if im, err := s.deps.Images.Lookup(r.Context(), ids[0]); err == nil && im.Digest != "" {
			js.send(progressMessage{Status: "Digest: " + im.Digest})
		}
	}
	js.send(progressMessage{Status: "Status: Downloaded newer image for " + ref})
}

// imageImport creates an image from a rootfs tarball (the body, or a URL).
func (s *server) imageImport(w http.ResponseWriter, r *http.Request, src string) {
	q := queryOf(r)
	opts := core.ImportOptions{Message: q.str("message"), Changes: q.v["changes"]}
	if ref := withTag(q.str("repo"), q.str("tag")); ref != "" {
		opts.Reference = dockerHubNames([]string{ref})[0]
	}
	if p := q.str("platform"); p != "" {
		parts := strings.Split(p, "/")
		opts.OS = parts[0]
		if len(parts) > 1 {
			opts.Arch = parts[1]
		}
	}
	var id string
	var err error
	if src == "-" {
		id, err = s.deps.Transfer.Import(r.Context(), r.Body, opts)
	} else {
		id, err = s.deps.Transfer.ImportURL(r.Context(), src, opts)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	js := startJSONStream(w)
	js.send(progressMessage{Status: imageID(id)})
}

// imagePush answers docker push: the stream, then the digest as aux.
func (s *server) imagePush(w http.ResponseWriter, r *http.Request, name string) {
	if s.deps.Transfer == nil {
		noRoute(w, r)
		return
	}
	auth, err := registryAuthHeader(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ref := name
	tag := r.URL.Query().Get("tag")
	if tag != "" {
		ref = name + ":" + tag
	}
	if _, err := s.deps.Images.Lookup(r.Context(), ref); err != nil {
		writeError(w, err)
		return
	}
	js := startJSONStream(w)
	js.send(progressMessage{Status: "The push refers to repository [" + name + "]"})
	digest, err := s.deps.Transfer.Push(r.Context(), ref, core.PushOptions{Destination: ref, Auth: auth, Format: "v2s2", TLSVerify: dockerTLSVerify(ref)})
	if err != nil {
		js.fail(err)
		return
	}
	shown := firstNonEmpty(tag, "latest")
	js.send(progressMessage{Status: fmt.Sprintf("%s: digest: %s", shown, digest)})
	js.send(progressMessage{ProgressDetail: &progressDetail{}, Aux: map[string]any{"Tag": shown, "Digest": digest}})
}

// imageGet streams one image as a docker-archive (docker save NAME).
func (s *server) imageGet(w http.ResponseWriter, r *http.Request, names []string) {
	if s.deps.Transfer == nil {
		noRoute(w, r)
		return
	}
	rc, err := s.deps.Transfer.Export(r.Context(), names, core.ExportOptions{Format: core.FormatDockerArchive})
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

// imageGetMany answers docker save with several names.
func (s *server) imageGetMany(w http.ResponseWriter, r *http.Request) {
	names := r.URL.Query()["names"]
	if len(names) == 0 {
		writeError(w, core.InvalidArgument("names", errors.New("at least one image is required")))
		return
	}
	s.imageGet(w, r, names)
}

// imageLoad answers docker load.
func (s *server) imageLoad(w http.ResponseWriter, r *http.Request) {
	if s.deps.Transfer == nil {
		noRoute(w, r)
		return
	}
	// dockerd's names: a short one is on Docker Hub, not under localhost/.
	names, err := s.deps.Transfer.Load(r.Context(), r.Body, core.LoadOptions{DockerHubShortNames: true})
	if err != nil {
		writeError(w, err)
		return
	}
	js := startJSONStream(w)
	for _, n := range names {
		if id := strings.TrimPrefix(n, "sha256:"); len(id) == 64 && strings.Trim(id, "0123456789abcdef") == "" {
			js.send(progressMessage{Stream: "Loaded image ID: " + imageID(id) + "\n"})
		} else {
			js.send(progressMessage{Stream: "Loaded image: " + familiarImageName(n) + "\n"})
		}
	}
}

// withTag joins Docker's repo and tag parameters; a repo that carries its
// own tag keeps it; "" stays "".
func withTag(repo, tag string) string {
	if repo == "" {
		return ""
	}
	if tag != "" {
		return repo + ":" + tag
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		return repo
	}
	return repo + ":latest"
}

// dockerTLSVerify applies dockerd's default insecure registries to ref:
// a registry on a loopback address (127.0.0.0/8, ::1, localhost) is talked
// to without TLS verification, falling back to plain HTTP, as Docker
// clients expect; any other registry follows the engine's registries.conf
// (nil). The libpod API has no such default: Podman's clients say
// tlsVerify=false themselves.
func dockerTLSVerify(ref string) *bool {
	ref = strings.TrimPrefix(ref, "docker://")
	host, _, found := strings.Cut(ref, "/")
	if !found || !strings.ContainsAny(host, ".:") && host != "localhost" {
		return nil // Docker Hub
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		verify := false
		return &verify
	}
	return nil
}
