package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
)

// v3API reports whether the request's path names an API version before 4.0.
func v3API(r *http.Request) bool {
	version := chi.URLParam(r, "version")
	if version == "" {
		return false
	}
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n < 4
}

// byAPIVersion serves v3 paths with v3 and the others with v4.
func byAPIVersion(v3, v4 http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v3API(r) {
			v3(w, r)
			return
		}
		v4(w, r)
	}
}

// v4Only serves a route that v3 paths do not have.
func v4Only(h http.HandlerFunc) http.HandlerFunc {
	return byAPIVersion(notFound, h)
}

// idReport is Podman's IDResponse.
type idReport struct {
	ID string `json:"Id"`
}

// manifestModifyBody is ManifestModify's body (and ManifestAddV3's, and
// ManifestCreate's optional one): Podman's ManifestModifyOptions. Fields of
// Podman 5's artifact instances and subjects are refused when set.
type manifestModifyBody struct {
	Operation        string            `json:"operation"`
	Images           []string          `json:"images"`
	All              bool              `json:"all"`
	Annotation       []string          `json:"annotation"`
	Annotations      map[string]string `json:"annotations"`
	Arch             string            `json:"arch"`
	Features         []string          `json:"features"`
	OS               string            `json:"os"`
	OSFeatures       []string          `json:"os_features"`
	OSVersion        string            `json:"os_version"`
	Variant          string            `json:"variant"`
	IndexAnnotation  []string          `json:"index_annotation"`
	IndexAnnotations map[string]string `json:"index_annotations"`

	Subject               string            `json:"subject"`
	ArtifactType          *string           `json:"artifact_type"`
	ArtifactConfigType    string            `json:"artifact_config_type"`
	ArtifactConfig        string            `json:"artifact_config"`
	ArtifactLayerType     string            `json:"artifact_layer_type"`
	ArtifactExcludeTitles bool              `json:"artifact_exclude_titles"`
	ArtifactSubject       string            `json:"artifact_subject"`
	ArtifactAnnotations   map[string]string `json:"artifact_annotations"`
	ArtifactFiles         []string          `json:"artifact_files"`
	// TLSVerify is ManifestAddV3's body field.
	TLSVerify *bool `json:"tlsVerify"`
	// Podman 4's clients also send these add options: credentials, an
	// authfile path (only empty is accepted: it names a client file) and
	// SkipTLSVerify (containers/image's OptionalBool: 1 skip, 2 verify).
	Authfile      string `json:"Authfile"`
	Username      string `json:"Username"`
	Password      string `json:"Password"`
	SkipTLSVerify int    `json:"SkipTLSVerify"`
}

// decodeModifyBody reads a modify body strictly: an unknown field or a
// field the engine does not implement is an ErrInvalidArgument naming it.
func decodeModifyBody(r io.Reader) (manifestModifyBody, error) {
	var body manifestModifyBody
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return body, core.InvalidArgument("body", err)
	}
	unsupported := map[string]bool{
		"subject":                 body.Subject != "",
		"artifact_type":           body.ArtifactType != nil && *body.ArtifactType != "",
		"artifact_config_type":    body.ArtifactConfigType != "",
		"artifact_config":         body.ArtifactConfig != "",
		"artifact_layer_type":     body.ArtifactLayerType != "",
		"artifact_exclude_titles": body.ArtifactExcludeTitles,
		"artifact_subject":        body.ArtifactSubject != "",
		"artifact_annotations":    len(body.ArtifactAnnotations) > 0,
		"artifact_files":          len(body.ArtifactFiles) > 0,
		"Authfile":                body.Authfile != "",
	}
	for field, set := range unsupported {
		if set {
			return body, core.InvalidArgument(field, errors.New("artifact instances and subjects in manifest lists are not supported"))
		}
	}
	return body, nil
}

// registry returns the body's registry options over the request's: the
// body's credentials and TLS choice win when set.
func (b manifestModifyBody) registry(tlsVerify *bool, auth *core.RegistryAuth) (*bool, *core.RegistryAuth) {
	switch {
	case b.TLSVerify != nil:
		tlsVerify = b.TLSVerify
	case b.SkipTLSVerify == 1:
		tlsVerify = new(bool)
	case b.SkipTLSVerify == 2:
		verify := true
		tlsVerify = &verify
	}
	if b.Username != "" || b.Password != "" {
		auth = &core.RegistryAuth{Default: &core.RegistryCredential{Username: b.Username, Password: b.Password}}
	}
	return tlsVerify, auth
}

// instanceOptions returns the per-instance fields of a modify body.
func (b manifestModifyBody) instanceOptions() (core.ManifestInstanceOptions, error) {
	annotations, err := joinAnnotations("annotation", b.Annotation, b.Annotations)
	if err != nil {
		return core.ManifestInstanceOptions{}, err
	}
	return core.ManifestInstanceOptions{
		Annotations: annotations,
		OS:          b.OS,
		OSVersion:   b.OSVersion,
		Arch:        b.Arch,
		Variant:     b.Variant,
		OSFeatures:  b.OSFeatures,
		Features:    b.Features,
	}, nil
}

// joinAnnotations merges Podman's two annotation forms: "key=value" strings
// (field) and a map. Setting both is refused, as Podman does.
func joinAnnotations(field string, list []string, given map[string]string) (map[string]string, error) {
	if len(list) > 0 && len(given) > 0 {
		return nil, core.InvalidArgument(field, fmt.Errorf("cannot set both %s and %ss", field, field))
	}
	if len(list) == 0 {
		return given, nil
	}
	return parseAnnotations(field, list)
}

// createQuery is ManifestCreate's query.
type createQuery struct {
	Name       string   `query:"name"`
	Images     []string `query:"images"`
	Image      []string `query:"image"`
	All        bool     `query:"all"`
	Amend      bool     `query:"amend"`
	Annotation []string `query:"annotation"`
}

// createManifestFromQuery is ManifestCreate at /manifests/create (the v3
// form, also served to later versions): the name is a query parameter, or
// on 4.x and later paths without one the list is named "create".
func (s *Server) createManifestFromQuery(w http.ResponseWriter, r *http.Request) {
	s.createManifestNamed(w, r, "")
}

// createManifest is ManifestCreate (v4: POST /manifests/{name}).
func (s *Server) createManifest(w http.ResponseWriter, r *http.Request) {
	s.createManifestNamed(w, r, pathParam(r, "name"))
}

// createManifestEndingIn is ManifestCreate (v4) reached through a v3
// route: the list's name is the path parameter plus the route's last segment.
func (s *Server) createManifestEndingIn(suffix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.createManifestNamed(w, r, pathParam(r, "name")+suffix)
	}
}

func (s *Server) createManifestNamed(w http.ResponseWriter, r *http.Request, name string) {
	var q createQuery
	if !queryInto(w, r, &q) {
		return
	}
	if name == "" {
		name = q.Name
	}
	if name == "" && !v3API(r) {
		// Podman serves /manifests/create only on 3.x paths; on later ones
		// "create" is the list's name (podman manifest create create).
		name = "create"
	}
	tlsVerify, auth, ok := registryQueryInto(w, r)
	if !ok {
		return
	}
	indexAnnotations, err := parseAnnotations("annotation", q.Annotation)
	if err != nil {
		writeError(w, err)
		return
	}
	opts := core.ManifestCreateOptions{Amend: q.Amend, IndexAnnotations: indexAnnotations}
	opts.All, opts.TLSVerify, opts.Auth = q.All, tlsVerify, auth
	images := slices.Concat(q.Images, q.Image)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, core.InvalidArgument("body", err))
		return
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		body, err := decodeModifyBody(bytes.NewReader(raw))
		if err == nil && body.Operation != "" && !strings.EqualFold(body.Operation, "update") {
			err = core.InvalidArgument("operation", fmt.Errorf("%q: creating a list only adds images", body.Operation))
		}
		if err == nil {
			opts.ManifestInstanceOptions, err = body.instanceOptions()
		}
		var index map[string]string
		if err == nil {
			index, err = joinAnnotations("index_annotation", body.IndexAnnotation, body.IndexAnnotations)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		opts.IndexAnnotations = mergeMaps(opts.IndexAnnotations, index)
		opts.All = opts.All || body.All
		images = append(images, body.Images...)
	}
	id, err := s.deps.Manifests.Create(r.Context(), name, images, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, createStatus(r), idReport{ID: id})
}

// createStatus is ManifestCreate's success status as Podman's handler
// chooses it: 201 when the path names API version 4.0 or later, 200 for 3.x
// paths and unversioned ones (Podman's version check fails there, and the
// handler keeps 200).
func createStatus(r *http.Request) int {
	if chi.URLParam(r, "version") == "" || v3API(r) {
		return http.StatusOK
	}
	return http.StatusCreated
}

// mergeMaps returns a with b's keys set.
func mergeMaps(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range b {
		a[k] = v
	}
	return a
}

// manifestExists is ManifestExists.
func (s *Server) manifestExists(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "name")
	found, err := s.deps.Manifests.Exists(r.Context(), name)
	if err == nil && !found {
		err = core.NoSuchManifestList(name)
	}
	writeExists(w, err, core.ErrNoSuchManifestList)
}

// inspectManifest is ManifestInspect: the list's manifest as stored.
func (s *Server) inspectManifest(w http.ResponseWriter, r *http.Request) {
	tlsVerify, auth, ok := registryQueryInto(w, r)
	if !ok {
		return
	}
	raw, err := s.deps.Manifests.Inspect(r.Context(), pathParam(r, "name"), core.ManifestInspectOptions{TLSVerify: tlsVerify, Auth: auth})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, json.RawMessage(raw))
}

// manifestModifyReport is ManifestModify's answer.
type manifestModifyReport struct {
	ID     string   `json:"Id"`
	Images []string `json:"images,omitempty"`
}

// modifyManifest is ManifestModify: update (add), remove or annotate.
func (s *Server) modifyManifest(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "name")
	tlsVerify, auth, ok := registryQueryInto(w, r)
	if !ok {
		return
	}
	body, err := decodeModifyBody(r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	instance, err := body.instanceOptions()
	if err != nil {
		writeError(w, err)
		return
	}
	index, err := joinAnnotations("index_annotation", body.IndexAnnotation, body.IndexAnnotations)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	report := manifestModifyReport{}
	switch strings.ToLower(body.Operation) {
	case "update":
		tlsVerify, auth = body.registry(tlsVerify, auth)
		if len(body.Images) == 0 {
			err = core.InvalidArgument("images", errors.New("update needs at least one image"))
			break
		}
		opts := core.ManifestAddOptions{ManifestInstanceOptions: instance, All: body.All, TLSVerify: tlsVerify, Auth: auth}
		report.ID, err = s.deps.Manifests.Add(ctx, name, body.Images, opts)
		report.Images = body.Images
	case "remove":
		if len(body.Images) == 0 {
			err = core.InvalidArgument("images", errors.New("remove needs at least one instance digest"))
		}
		for _, d := range body.Images {
			if report.ID, err = s.deps.Manifests.RemoveInstance(ctx, name, d); err != nil {
				break
			}
			report.Images = append(report.Images, d)
		}
	case "annotate":
		if len(index) > 0 {
			report.ID, err = s.deps.Manifests.Annotate(ctx, name, "", core.ManifestInstanceOptions{Annotations: index})
		}
		for _, image := range body.Images {
			if err != nil {
				break
			}
			report.ID, err = s.deps.Manifests.Annotate(ctx, name, image, instance)
			report.Images = append(report.Images, image)
		}
		if err == nil && len(index) == 0 && len(body.Images) == 0 {
			report.ID, err = s.deps.Manifests.Annotate(ctx, name, "", instance)
		}
	default:
		err = core.InvalidArgument("operation", fmt.Errorf("%q is not update, remove or annotate", body.Operation))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, report)
}

// addManifestV3 is ManifestAddV3: the body is Podman 3's add options.
func (s *Server) addManifestV3(w http.ResponseWriter, r *http.Request) {
	tlsVerify, auth, ok := registryQueryInto(w, r)
	if !ok {
		return
	}
	body, err := decodeModifyBody(r.Body)
	if err == nil && body.Operation != "" {
		err = core.InvalidArgument("operation", errors.New("ManifestAddV3 takes no operation"))
	}
	var instance core.ManifestInstanceOptions
	if err == nil {
		instance, err = body.instanceOptions()
	}
	if err != nil {
		writeError(w, err)
		return
	}
	tlsVerify, auth = body.registry(tlsVerify, auth)
	id, err := s.deps.Manifests.Add(r.Context(), pathParam(r, "name"), body.Images,
		core.ManifestAddOptions{ManifestInstanceOptions: instance, All: body.All, TLSVerify: tlsVerify, Auth: auth})
	finishJSON(w, http.StatusOK, idReport{ID: id}, err)
}

// removeManifestDigestV3 is ManifestRemoveDigestV3.
func (s *Server) removeManifestDigestV3(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Digest string `query:"digest"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	if q.Digest == "" {
		writeError(w, core.InvalidArgument("digest", errors.New("the instance digest is required")))
		return
	}
	id, err := s.deps.Manifests.RemoveInstance(r.Context(), pathParam(r, "name"), q.Digest)
	finishJSON(w, http.StatusOK, idReport{ID: id}, err)
}

// manifestRemoveReport is ManifestDelete's answer (Podman's
// LibpodImagesRemoveReport).
type manifestRemoveReport struct {
	Deleted  []string `json:"Deleted,omitempty"`
	Untagged []string `json:"Untagged,omitempty"`
	Errors   []string `json:"Errors"`
	ExitCode int      `json:"ExitCode"`
}

// deleteManifest is ManifestDelete (v4): the list goes, its instances stay.
func (s *Server) deleteManifest(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Ignore bool `query:"ignore"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	report, err := s.deps.Manifests.Delete(r.Context(), pathParam(r, "name"))
	if err != nil && !(q.Ignore && errors.Is(err, core.ErrNoSuchManifestList)) {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, manifestRemoveReport{Deleted: report.Deleted, Untagged: report.Untagged, Errors: []string{}})
}

// removeManifestLists is ImagesBatchRemove with lookupmanifest (podman
// manifest rm): each name must be a manifest list; always 200, failures in
// Errors and ExitCode (1 when a list is missing).
func (s *Server) removeManifestLists(w http.ResponseWriter, r *http.Request, names []string, all, ignore bool) {
	if s.deps.Manifests == nil || all {
		writeError(w, core.InvalidArgument("lookupmanifest", errors.New("needs named manifest lists")))
		return
	}
	out := removeReport{}
	for _, name := range names {
		report, err := s.deps.Manifests.Delete(r.Context(), name)
		switch {
		case err == nil:
			out.Deleted = append(out.Deleted, report.Deleted...)
			out.Untagged = append(out.Untagged, report.Untagged...)
		case ignore && errors.Is(err, core.ErrNoSuchManifestList):
		default:
			out.Errors = append(out.Errors, err.Error())
			if out.ExitCode == 0 {
				out.ExitCode = report.ExitCode
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// pushManifest is ManifestPush (v4). Quiet (the default) answers the
// pushed digest once done; otherwise progress lines stream and the last
// line carries the digest or the error.
func (s *Server) pushManifest(w http.ResponseWriter, r *http.Request) {
	q := manifestPushQuery{Quiet: true, TLSVerify: true}
	if !queryInto(w, r, &q) {
		return
	}
	s.runManifestPush(w, r, pathParam(r, "destination"), q)
}

// manifestPushQuery is ManifestPush's query (Podman 4's clients also send
// authfile, which must be empty, and username and password).
type manifestPushQuery struct {
	All               bool   `query:"all"`
	Destination       string `query:"destination"`
	Format            string `query:"format"`
	CompressionFormat string `query:"compressionformat"`
	RemoveSignatures  bool   `query:"removesignatures"`
	Quiet             bool   `query:"quiet"`
	TLSVerify         bool   `query:"tlsverify"`
	Authfile          string `query:"authfile"`
	Username          string `query:"username"`
	Password          string `query:"password"`
}

// pushManifestV3 is ManifestPushV3: the destination is a query parameter
// and the answer is the digest.
func (s *Server) pushManifestV3(w http.ResponseWriter, r *http.Request) {
	q := manifestPushQuery{TLSVerify: true}
	if !queryInto(w, r, &q) {
		return
	}
	q.Quiet = true
	s.runManifestPush(w, r, q.Destination, q)
}

// manifestPushReport is one line of ManifestPush's answer.
type manifestPushReport struct {
	ID     string `json:"Id,omitempty"`
	Stream string `json:"stream,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (s *Server) runManifestPush(w http.ResponseWriter, r *http.Request, destination string, q manifestPushQuery) {
	tlsVerify, auth, err := registryQuery(r)
	if err == nil && q.Authfile != "" {
		err = core.InvalidArgument("authfile", errors.New("names a client file; send credentials in X-Registry-Auth"))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if auth == nil && (q.Username != "" || q.Password != "") {
		auth = &core.RegistryAuth{Default: &core.RegistryCredential{Username: q.Username, Password: q.Password}}
	}
	opts := core.ManifestPushOptions{All: q.All, Format: q.Format, CompressionFormat: q.CompressionFormat,
		RemoveSignatures: q.RemoveSignatures, TLSVerify: tlsVerify, Auth: auth}
	stream := newJSONStream(w)
	var held *heldLines
	if !q.Quiet {
		// As PushImage: lines wait for the first blob, so that a push the
		// registry refuses at once (TLS) gets its status.
		held = holdLines(stream)
		opts.Progress = held.progress(func(text string) any { return manifestPushReport{Stream: text} })
		opts.Blobs = func(core.BlobProgress) { held.release() }
	}
	pushed, err := s.deps.Manifests.Push(r.Context(), pathParam(r, "name"), destination, opts)
	if held != nil && !held.finish(err != nil) {
		writeError(w, err)
		return
	}
	if answerUnstreamed(w, stream, err, func() { writeJSON(w, http.StatusOK, idReport{ID: pushed}) }) {
		return
	}
	if err != nil {
		stream.send(manifestPushReport{Error: err.Error()})
		return
	}
	stream.send(manifestPushReport{ID: pushed})
}
