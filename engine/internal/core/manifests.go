package core

import (
	"context"
	"io"
)

// ManifestInstanceOptions describe instances being added to a manifest list
// or annotated in it: the platform fields override what the instance's own
// configuration says, the annotations go on the instance's entry.
type ManifestInstanceOptions struct {
	// Annotations are set on each instance's entry.
	Annotations map[string]string
	// OS, OSVersion, Arch and Variant override the instance's platform.
	OS, OSVersion, Arch, Variant string
	// OSFeatures and Features are the platform's feature lists.
	OSFeatures, Features []string
}

// ManifestAddOptions are the parameters of adding instances to a list.
type ManifestAddOptions struct {
	ManifestInstanceOptions
	// All adds every instance of an image that is itself a list; otherwise
	// only the instance for this engine's platform is added.
	All bool
	// TLSVerify, when not nil, overrides the registries configuration for
	// instances read from registries.
	TLSVerify *bool
	// Auth are the client's registry credentials, if any.
	Auth *RegistryAuth
}

// ManifestCreateOptions are the parameters of creating a list.
type ManifestCreateOptions struct {
	ManifestAddOptions
	// Amend returns the existing list of that name instead of failing.
	Amend bool
	// IndexAnnotations are set on the list itself.
	IndexAnnotations map[string]string
}

// ManifestInspectOptions are the parameters of inspecting a list that may
// only exist in a registry.
type ManifestInspectOptions struct {
	TLSVerify *bool
	Auth      *RegistryAuth
}

// ManifestPushOptions are the parameters of pushing a list.
type ManifestPushOptions struct {
	// All pushes every instance; otherwise only the list itself, whose
	// instances must already be in the destination repository.
	All bool
	// Format forces the list's and instances' manifest format: "oci", "v2s2" or "" to keep them.
	Format string
	// CompressionFormat is the layer compression for instances that are
	// compressed on the way ("gzip", "zstd"; "" is gzip).
	CompressionFormat string
	// RemoveSignatures drops the instances' signatures.
	RemoveSignatures bool
	TLSVerify        *bool
	Auth             *RegistryAuth
	// Progress receives human-readable progress text; nil discards it.
	Progress io.Writer
	// Blobs, when set, receives each blob's progress as it is copied: the
	// first call means the registry accepted the connection.
	Blobs func(BlobProgress)
}

// ManifestLists are manifest lists (Docker manifest lists and OCI image
// indexes) kept as images in the local store: a list is an image whose
// manifest names other images' manifests by digest.
type ManifestLists interface {
	// Create makes a list named name with images as its first instances and
	// returns its ID. A name held by an image is ErrNameInUse (also by a
	// list, unless Amend).
	Create(ctx context.Context, name string, images []string, opts ManifestCreateOptions) (string, error)
	// Exists reports whether name is a local manifest list.
	Exists(ctx context.Context, name string) (bool, error)
	// Inspect returns the list's manifest: the local list of that name, or
	// else the list (or image manifest) a registry has for name.
	Inspect(ctx context.Context, name string, opts ManifestInspectOptions) ([]byte, error)
	// Add adds images (local names or IDs, or docker:// references) and
	// returns the list's ID.
	Add(ctx context.Context, name string, images []string, opts ManifestAddOptions) (string, error)
	// Annotate sets platform fields and annotations of one instance (a
	// digest, or a local image whose manifest is in the list), or with
	// instance "" sets annotations of the list itself.
	Annotate(ctx context.Context, name, instance string, opts ManifestInstanceOptions) (string, error)
	// RemoveInstance removes the instance with the given digest.
	RemoveInstance(ctx context.Context, name, instanceDigest string) (string, error)
	// Push copies the list (and with All its instances) to a registry and
	// returns the digest of the pushed list.
	Push(ctx context.Context, name, destination string, opts ManifestPushOptions) (string, error)
	// Delete removes the list (not its instances).
	Delete(ctx context.Context, name string) (ImageRemoveReport, error)
}
