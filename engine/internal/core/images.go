package core

import (
	"context"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Image is one image in local storage, with its names resolved into tags and
// digests and its configuration decoded. Containers are created from the
// image's TopLayer and Config.
type Image struct {
	// ID is the image ID (the config digest's hex part).
	ID string
	// Digest is the digest of the image's manifest.
	Digest string
	// Names are the raw names recorded in storage (tags and digested references).
	Names []string
	// RepoTags are the tagged names ("localhost/app:1").
	RepoTags []string
	// RepoDigests are the digested names ("localhost/app@sha256:...").
	RepoDigests []string
	// NamesHistory lists names the image had, most recent first.
	NamesHistory []string
	// TopLayer is the storage ID of the image's top layer ("" for an image without layers).
	TopLayer string
	// Layers are the storage layer IDs, top layer first.
	Layers []string
	// Created is when the image was built (from its config), or stored.
	Created time.Time
	// Size is the sum of the uncompressed sizes of the image's layers.
	Size int64
	// ManifestType is the MIME type of the image's manifest.
	ManifestType string
	// Config is the image's OCI configuration (platform, runtime config, rootfs, history).
	Config ocispec.Image
	// Annotations are the manifest's annotations.
	Annotations map[string]string
	// HealthCheck is the Docker-format health check of the image, if any.
	HealthCheck *HealthConfig
	// Parent is the ID of the local image whose layers this image extends, if any.
	Parent string
	// ReadOnly is true for images in a read-only additional store.
	ReadOnly bool
	// Dangling is true when the image has no tags.
	Dangling bool
	// GraphDriver names the storage driver and its per-image data (UpperDir, LowerDir ...).
	GraphDriver GraphDriver
}

// GraphDriver describes how an image's layers are stored.
type GraphDriver struct {
	Name string            `json:"Name"`
	Data map[string]string `json:"Data"`
}

// HealthConfig is the Docker image-format health check.
type HealthConfig struct {
	Test        []string      `json:"Test,omitempty"`
	StartPeriod time.Duration `json:"StartPeriod,omitempty"`
	Interval    time.Duration `json:"Interval,omitempty"`
	Timeout     time.Duration `json:"Timeout,omitempty"`
	Retries     int           `json:"Retries,omitempty"`
}

// ImageSummary is one row of an image listing, in Podman's wire shape.
type ImageSummary struct {
	ID          string            `json:"Id"`
	ParentID    string            `json:"ParentId"`
	RepoTags    []string          `json:"RepoTags"`
	RepoDigests []string          `json:"RepoDigests"`
	Created     int64             `json:"Created"`
	Size        int64             `json:"Size"`
	SharedSize  int               `json:"SharedSize"`
	VirtualSize int64             `json:"VirtualSize"`
	Labels      map[string]string `json:"Labels"`
	Containers  int               `json:"Containers"`
	ReadOnly    bool              `json:"ReadOnly,omitempty"`
	Dangling    bool              `json:"Dangling,omitempty"`
	Names       []string          `json:"Names,omitempty"`
	Digest      string            `json:"Digest,omitempty"`
	History     []string          `json:"History,omitempty"`
	// Arch and Os come from the image's configuration; IsManifestList is
	// always set (true for a manifest list or OCI index), as Podman's
	// libpod listing has it.
	Arch           string `json:"Arch,omitempty"`
	Os             string `json:"Os,omitempty"`
	IsManifestList *bool  `json:"IsManifestList,omitempty"`
}

// ImageListOptions selects images for a listing.
type ImageListOptions struct {
	// All includes intermediate images (untagged images that are the parent of another image).
	All bool
	// Filters maps a filter name (reference, label, dangling, before, since, id ...)
	// to its values; every filter must match, values of one filter are alternatives
	// (label values must all match, as Podman does).
	Filters map[string][]string
}

// ImageHistoryEntry is one step of an image's history. ID is the ID of the
// local image whose top layer this step made, or "<missing>".
type ImageHistoryEntry struct {
	ID        string
	Created   time.Time
	CreatedBy string
	Tags      []string
	Size      int64
	Comment   string
}

// ImageRemoveOptions alters image removal.
type ImageRemoveOptions struct {
	// All removes every image.
	All bool
	// Force removes images used by containers, removing those containers first,
	// and removes every tag of an image named by ID.
	Force bool
	// Ignore skips names that match no image instead of failing.
	Ignore bool
	// NoPrune keeps the now-dangling parent images.
	NoPrune bool
	// KeepContainers makes Force spare the containers (Docker's force): an
	// image containers use loses the name it was removed by (every name when
	// removed by ID or digest) and stays, dangling, for them.
	KeepContainers bool
}

// ImageRemoveReport tells what a removal untagged and deleted, in Podman's wire shape.
type ImageRemoveReport struct {
	Deleted  []string `json:"Deleted,omitempty"`
	Untagged []string `json:"Untagged,omitempty"`
	// DockerDeleted is what went as dockerd lists it: each deleted image's
	// ID, then the storage layers that went with it. Not on Podman's wire.
	DockerDeleted []string `json:"-"`
	// ExitCode follows podman rmi: 0 ok, 1 no such image, 2 image in use, 125 other error.
	ExitCode int `json:"ExitCode"`
}

// ImagePruneOptions selects images to prune.
type ImagePruneOptions struct {
	// All prunes every image not used by a container, not only dangling ones.
	All bool
	// Filters narrow the selection (label, label!, until, dangling).
	Filters map[string][]string
}

// PruneReport is one pruned object with the space it freed, in Podman's wire shape.
type PruneReport struct {
	ID   string `json:"Id"`
	Err  string `json:"Err,omitempty"`
	Size uint64 `json:"Size"`
}

// Images is the metadata side of the image store: listing, inspecting,
// naming and removing images that are already local.
type Images interface {
	// List returns the images matching opts.
	List(ctx context.Context, opts ImageListOptions) ([]ImageSummary, error)
	// Lookup finds one image by name (short or fully qualified, tagged or
	// digested) or by full or prefix ID. ErrNoSuchImage when none matches.
	Lookup(ctx context.Context, nameOrID string) (*Image, error)
	// Resolve returns the fully qualified candidate names a short name stands for,
	// in the order they are tried.
	Resolve(ctx context.Context, name string) ([]string, error)
	// History returns an image's history, newest first.
	History(ctx context.Context, nameOrID string) ([]ImageHistoryEntry, error)
	// Tree renders the layer tree of an image (or, with whatRequires, the images based on it).
	Tree(ctx context.Context, nameOrID string, whatRequires bool) (string, error)
	// Tag adds the name repo:tag (tag defaults to "latest") to an image.
	Tag(ctx context.Context, nameOrID, repo, tag string) error
	// Untag removes the given names (all names when none are given) from an image.
	Untag(ctx context.Context, nameOrID string, names []string) error
	// Remove removes images by name or ID; the errors are per image.
	Remove(ctx context.Context, namesOrIDs []string, opts ImageRemoveOptions) (ImageRemoveReport, []error)
	// Prune removes unused images and reports the space reclaimed.
	Prune(ctx context.Context, opts ImagePruneOptions) ([]PruneReport, error)
	// DiskUsage reports each image tag's size, shared and unique parts.
	DiskUsage(ctx context.Context) (*ImagesDiskUsage, error)
}

// ImageUsers is the container side of image removal: the image store asks it
// which containers use an image, and removes those containers when a removal
// is forced. The containers backend implements it.
type ImageUsers interface {
	// ContainersUsingImage returns the IDs of the containers created from imageID.
	ContainersUsingImage(ctx context.Context, imageID string) ([]string, error)
	// RemoveContainer removes a container and its storage, stopping it first.
	RemoveContainer(ctx context.Context, containerID string) error
	// SettleRemovals waits until the storage of every removed container is
	// deleted (a remove deletes it in the background), so that what storage
	// says of an image's users is current.
	SettleRemovals()
}
