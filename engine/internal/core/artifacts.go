package core

import (
	"context"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Artifact is an OCI artifact in the engine's artifact store: a named OCI
// image manifest whose layers are files (each titled by the
// org.opencontainers.image.title annotation) rather than filesystem layers.
type Artifact struct {
	// Name is the artifact's reference ("quay.io/org/data:1").
	Name string
	// Digest is the digest of the artifact's manifest.
	Digest string
	// Manifest is the artifact's OCI manifest.
	Manifest ocispec.Manifest
}

// ArtifactAddOptions are the parameters of adding a file to an artifact.
type ArtifactAddOptions struct {
	// Name is the artifact's reference; a name without tag gets ":latest".
	Name string
	// FileName is the file's title in the artifact.
	FileName string
	// FileMIMEType is the layer's media type; "" detects it from the content.
	FileMIMEType string
	// Annotations go on the file's layer.
	Annotations map[string]string
	// ArtifactMIMEType is the manifest's artifactType.
	ArtifactMIMEType string
	// Append adds the file to an existing artifact.
	Append bool
	// Replace replaces an existing artifact of that name.
	Replace bool
}

// ArtifactRemoveOptions are the parameters of a batch removal.
type ArtifactRemoveOptions struct {
	// All removes every artifact.
	All bool
	// Ignore skips names that match no artifact.
	Ignore bool
}

// ArtifactExtractOptions select what an extraction writes.
type ArtifactExtractOptions struct {
	// Title selects the one file with this title.
	Title string
	// Digest selects the one file with this digest.
	Digest string
	// ExcludeTitle leaves a single file's name empty in the archive.
	ExcludeTitle bool
}

// ArtifactFile is one file of an artifact: its name (its title, or
// "sha256-<hex>" when untitled or selected by digest) and the path of the
// blob holding it on the engine's host, which must never be written.
type ArtifactFile struct {
	Name string
	Path string
}

// ArtifactTransferOptions are the parameters of pulling or pushing an artifact.
type ArtifactTransferOptions struct {
	TLSVerify *bool
	Auth      *RegistryAuth
	// Retry is how many times a failed transfer is retried (nil: 3).
	Retry *uint
	// RetryDelay is the delay before the first retry ("" doubles from one second).
	RetryDelay string
}

// Artifacts are OCI artifacts kept in an OCI layout under the engine's root.
// They are not images: they do not show in image listings.
type Artifacts interface {
	// Add stores body as a file of an artifact and returns the artifact's digest.
	Add(ctx context.Context, opts ArtifactAddOptions, body io.Reader) (string, error)
	// AddLocal is Add of a regular file on the engine host (an absolute path).
	AddLocal(ctx context.Context, opts ArtifactAddOptions, path string) (string, error)
	// List returns every artifact.
	List(ctx context.Context) ([]Artifact, error)
	// Inspect finds an artifact by name or digest (or digest prefix).
	Inspect(ctx context.Context, nameOrDigest string) (*Artifact, error)
	// Remove removes artifacts and returns their digests.
	Remove(ctx context.Context, namesOrDigests []string, opts ArtifactRemoveOptions) ([]string, error)
	// Extract validates the selection and returns a function that writes the
	// selected files as a tar stream.
	Extract(ctx context.Context, nameOrDigest string, opts ArtifactExtractOptions) (func(io.Writer) error, error)
	// Files answers the files an extraction with opts would write, each
	// where the store keeps it (a container's artifact mounts bind them).
	Files(ctx context.Context, nameOrDigest string, opts ArtifactExtractOptions) ([]ArtifactFile, error)
	// Pull copies an artifact from a registry into the store and returns its digest.
	Pull(ctx context.Context, name string, opts ArtifactTransferOptions) (string, error)
	// Push copies an artifact to the registry its name points at and returns the pushed digest.
	Push(ctx context.Context, name string, opts ArtifactTransferOptions) (string, error)
}
