package handlers

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// registerImageRoutes: the image metadata operations (transfer routes live in
// images_transfer.go).
func registerImageRoutes(r chi.Router, s *Server) {
	if s.deps.Images == nil {
		return
	}
	r.Get("/images/{name:.*}/json", s.inspectImage)
	r.Get("/images/{name:.*}/exists", s.imageExists)
}

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

// imageExists answers ImageExists: 204 or 404.
func (s *Server) imageExists(w http.ResponseWriter, r *http.Request) {
	if _, err := s.deps.Images.Lookup(r.Context(), pathParam(r, "name")); err != nil {
		writeError(w, err)
		return
	}
	writeNoContent(w)
}
