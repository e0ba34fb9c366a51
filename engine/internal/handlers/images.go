package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// imageInspect is Podman's image inspect document.
type imageInspect struct {
	ID           string               `json:"Id"`
	Digest       string               `json:"Digest"`
	RepoTags     []string             `json:"RepoTags"`
	RepoDigests  []string             `json:"RepoDigests"`
	Parent       string               `json:"Parent"`
	Comment      string               `json:"Comment"`
	Created      *time.Time           `json:"Created"`
	Config       *ocispec.ImageConfig `json:"Config"`
	Version      string               `json:"Version"`
	Author       string               `json:"Author"`
	Architecture string               `json:"Architecture"`
	Os           string               `json:"Os"`
	Size         int64                `json:"Size"`
	VirtualSize  int64                `json:"VirtualSize"`
	GraphDriver  core.GraphDriver     `json:"GraphDriver"`
	RootFS       rootFS               `json:"RootFS"`
	Labels       map[string]string    `json:"Labels"`
	Annotations  map[string]string    `json:"Annotations"`
	ManifestType string               `json:"ManifestType"`
	User         string               `json:"User"`
	History      []ocispec.History    `json:"History"`
	NamesHistory []string             `json:"NamesHistory"`
	HealthCheck  *core.HealthConfig   `json:"Healthcheck,omitempty"`
}

type rootFS struct {
	Type   string   `json:"Type"`
	Layers []string `json:"Layers"`
}

// newImageInspect renders an image as Podman's inspect document.
func newImageInspect(img *core.Image) imageInspect {
	created := img.Created
	cfg := img.Config.Config
	layers := make([]string, 0, len(img.Config.RootFS.DiffIDs))
	for _, d := range img.Config.RootFS.DiffIDs {
		layers = append(layers, d.String())
	}
	history := img.Config.History
	if history == nil {
		history = []ocispec.History{}
	}
	names := img.NamesHistory
	if names == nil {
		names = []string{}
	}
	labels := cfg.Labels
	return imageInspect{
		ID:           img.ID,
		Digest:       img.Digest,
		RepoTags:     nonNil(img.RepoTags),
		RepoDigests:  nonNil(img.RepoDigests),
		Parent:       img.Parent,
		Comment:      imageComment(img),
		Created:      &created,
		Config:       &cfg,
		Author:       img.Config.Author,
		Architecture: img.Config.Architecture,
		Os:           img.Config.OS,
		Size:         img.Size,
		VirtualSize:  img.Size,
		GraphDriver:  img.GraphDriver,
		RootFS:       rootFS{Type: "layers", Layers: layers},
		Labels:       labels,
		Annotations:  img.Annotations,
		ManifestType: img.ManifestType,
		User:         cfg.User,
		History:      history,
		NamesHistory: names,
		HealthCheck:  img.HealthCheck,
	}
}

// imageComment is the comment of the image's newest history entry.
func imageComment(img *core.Image) string {
	if n := len(img.Config.History); n > 0 {
		return img.Config.History[n-1].Comment
	}
	return ""
}

// nonNil turns a nil list into an empty one, as clients expect [] not null.
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// inspectImage answers GetImage.
func (s *Server) inspectImage(w http.ResponseWriter, r *http.Request) {
	img, err := s.deps.Images.Lookup(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, newImageInspect(img))
}

// imageSelection is the all and filters query that GetImages and
// PruneImages share; Filters is already in the client's API form.
type imageSelection struct {
	All     bool                `query:"all"`
	Filters map[string][]string `query:"filters"`
}

// decodeImageSelection reads an imageSelection from r's query. On a bad query
// it answers the error itself and reports false.
func decodeImageSelection(w http.ResponseWriter, r *http.Request) (imageSelection, bool) {
	var query imageSelection
	if err := decodeQuery(r, &query); err != nil {
		writeError(w, err)
		return imageSelection{}, false
	}
	query.Filters = filtersForClient(r, query.Filters)
	return query, true
}

// listImages answers GetImages.
func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	query, ok := decodeImageSelection(w, r)
	if !ok {
		return
	}
	opts := core.ImageListOptions{All: query.All, Filters: query.Filters}
	if enc, ok := s.deps.Images.(imageListEncoder); ok {
		data, err := enc.ListJSON(r.Context(), opts)
		if err != nil {
			writeError(w, err)
			return
		}
		var gz *gzipMemo
		if len(opts.Filters) == 0 {
			gz = s.imageListGzip[boolIndex(opts.All)]
		}
		writeListing(w, r, data, gz)
		return
	}
	images, err := s.deps.Images.List(r.Context(), opts)
	finishJSON(w, http.StatusOK, images, err)
}

// imageListEncoder is an Images that answers listings already encoded: the
// unfiltered listing, polled by many clients, is encoded once a change.
type imageListEncoder interface {
	ListJSON(ctx context.Context, opts core.ImageListOptions) ([]byte, error)
}

// boolIndex is 1 for true, 0 for false.
func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// resolveImage answers ImageResolve: the fully qualified names a short name stands for.
func (s *Server) resolveImage(w http.ResponseWriter, r *http.Request) {
	names, err := s.deps.Images.Resolve(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Names []string `json:"Names"`
	}{Names: nonNil(names)})
}

// imageTree answers ImageTree.
func (s *Server) imageTree(w http.ResponseWriter, r *http.Request) {
	query := struct {
		WhatRequires bool `query:"whatrequires"`
	}{}
	if !queryInto(w, r, &query) {
		return
	}
	tree, err := s.deps.Images.Tree(r.Context(), pathParam(r, "name"), query.WhatRequires)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Tree string `json:"Tree"`
	}{Tree: tree})
}

// historyEntry is one row of HistoryImage, in Podman's wire shape.
type historyEntry struct {
	ID        string   `json:"Id"`
	Created   int64    `json:"Created"`
	CreatedBy string   `json:"CreatedBy"`
	Tags      []string `json:"Tags"`
	Size      int64    `json:"Size"`
	Comment   string   `json:"Comment"`
}

// imageHistory answers HistoryImage.
func (s *Server) imageHistory(w http.ResponseWriter, r *http.Request) {
	history, err := s.deps.Images.History(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]historyEntry, 0, len(history))
	for _, h := range history {
		out = append(out, historyEntry{ID: h.ID, Created: h.Created.Unix(), CreatedBy: h.CreatedBy, Tags: h.Tags, Size: h.Size, Comment: h.Comment})
	}
	writeJSON(w, http.StatusOK, out)
}

// repoTag is the repo and tag query that TagImage and UntagImage share.
type repoTag struct {
	Repo string `query:"repo"`
	Tag  string `query:"tag"`
}

// decodeRepoTag reads a repoTag from r's query. On a bad query it answers the
// error itself and reports false.
func decodeRepoTag(w http.ResponseWriter, r *http.Request) (repoTag, bool) {
	var query repoTag
	if err := decodeQuery(r, &query); err != nil {
		writeError(w, err)
		return repoTag{}, false
	}
	return query, true
}

// tagImage answers TagImage: 201 with no body.
func (s *Server) tagImage(w http.ResponseWriter, r *http.Request) {
	query, ok := decodeRepoTag(w, r)
	if !ok {
		return
	}
	finishStatus(w, http.StatusCreated, s.deps.Images.Tag(r.Context(), pathParam(r, "name"), query.Repo, query.Tag))
}

// untagImage answers UntagImage: one name (repo and tag) or, with neither, every name. 201.
func (s *Server) untagImage(w http.ResponseWriter, r *http.Request) {
	query, ok := decodeRepoTag(w, r)
	if !ok {
		return
	}
	var names []string
	switch {
	case query.Repo == "" && query.Tag != "":
		writeError(w, core.InvalidArgument("repo", errors.New("repo is required when tag is given")))
		return
	case query.Repo != "" && strings.HasPrefix(query.Tag, "@"):
		names = []string{query.Repo + query.Tag}
	case query.Repo != "":
		tag := query.Tag
		if tag == "" {
			tag = "latest"
		}
		names = []string{query.Repo + ":" + tag}
	}
	finishStatus(w, http.StatusCreated, s.deps.Images.Untag(r.Context(), pathParam(r, "name"), names))
}

// removeReport is the answer of ImagesRemove and ImagesBatchRemove.
type removeReport struct {
	Deleted  []string `json:"Deleted,omitempty"`
	Untagged []string `json:"Untagged,omitempty"`
	ExitCode int      `json:"ExitCode"`
	Errors   []string `json:"Errors"`
}

// removeImages answers ImagesBatchRemove: always 200, failures in Errors and ExitCode.
func (s *Server) removeImages(w http.ResponseWriter, r *http.Request) {
	query := struct {
		All     bool     `query:"all"`
		Force   bool     `query:"force"`
		Ignore  bool     `query:"ignore"`
		NoPrune bool     `query:"noprune"`
		Images  []string `query:"images"`
		// LookupManifest (podman manifest rm) names manifest lists only.
		LookupManifest bool `query:"lookupmanifest"`
	}{}
	if !queryInto(w, r, &query) {
		return
	}
	if !query.All && len(query.Images) == 0 {
		writeError(w, core.InvalidArgument("images", errors.New("name at least one image, or set all")))
		return
	}
	if query.LookupManifest {
		s.removeManifestLists(w, r, query.Images, query.All, query.Ignore)
		return
	}
	report, errs := s.deps.Images.Remove(r.Context(), query.Images, core.ImageRemoveOptions{
		All: query.All, Force: query.Force, Ignore: query.Ignore, NoPrune: query.NoPrune,
	})
	// Errors is null when there are none, as Podman answers.
	out := removeReport{Deleted: report.Deleted, Untagged: report.Untagged, ExitCode: report.ExitCode}
	for _, err := range errs {
		out.Errors = append(out.Errors, err.Error())
	}
	writeJSON(w, http.StatusOK, out)
}

// removeImage answers ImagesRemove: one image; failures carry their status
// (404 no such image, 409 in use).
func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	query := struct {
		Force   bool `query:"force"`
		Ignore  bool `query:"ignore"`
		NoPrune bool `query:"noprune"`
	}{}
	if !queryInto(w, r, &query) {
		return
	}
	report, errs := s.deps.Images.Remove(r.Context(), []string{pathParam(r, "name")}, core.ImageRemoveOptions{
		Force: query.Force, Ignore: query.Ignore, NoPrune: query.NoPrune,
	})
	if len(errs) > 0 {
		writeError(w, joinErrors(errs))
		return
	}
	writeJSON(w, http.StatusOK, removeReport{Deleted: report.Deleted, Untagged: report.Untagged, ExitCode: report.ExitCode, Errors: []string{}})
}

// joinErrors combines per-object errors, keeping the first one's kind for the status.
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	texts := make([]string, 0, len(errs))
	for _, err := range errs {
		texts = append(texts, err.Error())
	}
	return fmt.Errorf("%s: %w", strings.Join(texts, "; "), errs[0])
}

// pruneImages answers PruneImages with one report per removed image.
func (s *Server) pruneImages(w http.ResponseWriter, r *http.Request) {
	query, ok := decodeImageSelection(w, r)
	if !ok {
		return
	}
	var cache struct {
		// BuildCache (podman image prune --build-cache) empties the RUN
		// --mount=type=cache directories too, as all does (Podman's rule).
		BuildCache bool `query:"buildcache"`
	}
	if !queryInto(w, r, &cache) {
		return
	}
	reports, err := s.deps.Images.Prune(r.Context(), core.ImagePruneOptions{All: query.All, Filters: query.Filters})
	if err == nil && (query.All || cache.BuildCache) && s.deps.Build != nil {
		_, err = s.deps.Build.PruneCache(r.Context(), core.BuildCachePruneOptions{All: true})
	}
	finishJSON(w, http.StatusOK, reports, err)
}
