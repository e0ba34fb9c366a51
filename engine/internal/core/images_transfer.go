package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// PullPolicy decides whether a pull contacts the registry.
type PullPolicy string

// The pull policies Podman accepts in ImagesPull's `policy` parameter.
const (
	// PullAlways always pulls, even when the image is local.
	PullAlways PullPolicy = "always"
	// PullMissing pulls only when no local image has the name.
	PullMissing PullPolicy = "missing"
	// PullNever never pulls: the image must be local.
	PullNever PullPolicy = "never"
	// PullNewer pulls when the registry's manifest differs from the local image's.
	PullNewer PullPolicy = "newer"
)

// ParsePullPolicy reads a policy as Podman spells it ("ifmissing" and
// "ifnewer" are Podman's aliases); "" means always.
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch s {
	case "", "always", "Always":
		return PullAlways, nil
	case "missing", "ifmissing", "IfMissing":
		return PullMissing, nil
	case "never", "Never":
		return PullNever, nil
	case "newer", "ifnewer", "IfNewer":
		return PullNewer, nil
	}
	return "", InvalidArgument("policy", fmt.Errorf("must be always, missing, never or newer, not %q", s))
}

// RegistryAuth carries the credentials a client sent in X-Registry-Auth:
// either one credential for whatever registry the operation talks to, or
// credentials per registry (keys are hosts, host/namespaces or URLs).
type RegistryAuth struct {
	// Default applies to every registry when set.
	Default *RegistryCredential
	// PerRegistry maps a registry (or registry/namespace) to its credential.
	PerRegistry map[string]RegistryCredential
}

// RegistryCredential is one registry login.
type RegistryCredential struct {
	Username      string
	Password      string
	IdentityToken string
}

// PullOptions are the parameters of ImagesPull.
type PullOptions struct {
	// Reference is a registry reference or a name that normalizes to one.
	Reference string
	// Policy decides whether the registry is contacted.
	Policy PullPolicy
	// TLSVerify, when not nil, overrides the registries configuration.
	TLSVerify *bool
	// Auth are the client's credentials, if any.
	Auth *RegistryAuth
	// AllTags pulls every tag of the repository.
	AllTags bool
	// OS, Arch and Variant choose the platform from a manifest list.
	OS, Arch, Variant string
	// Progress receives human-readable progress text; nil discards it.
	Progress io.Writer
	// Blobs, when set, receives each blob's progress as it is copied.
	Blobs func(BlobProgress)
	// Retries and RetryDelay: see TransferRetries.
	TransferRetries
}

// TransferRetries are Podman's --retry and --retry-delay of a pull or push:
// a copy that failed for a reason another try may not meet (Retryable) is
// tried again up to Retries times, RetryDelay apart; 0 does not try again.
type TransferRetries struct {
	Retries    int
	RetryDelay time.Duration
}

// Retryable tells whether a failed copy to or from a registry may succeed
// when tried again: not after a definitive answer (no such image, refused
// credentials, a bad reference or TLS setting, a platform the image lacks,
// a limit) or a request that was cancelled.
func Retryable(err error) bool {
	for _, final := range []error{context.Canceled, context.DeadlineExceeded, ErrNoSuchImage, ErrUnauthorized,
		ErrInvalidArgument, ErrPlatformMismatch, ErrTooLarge} {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}

// BlobEvent names a step of a blob's copy.
type BlobEvent string

// The steps of a blob's copy.
const (
	BlobStarted BlobEvent = "started"
	BlobRead    BlobEvent = "read"
	BlobDone    BlobEvent = "done"
	BlobSkipped BlobEvent = "skipped"
)

// BlobProgress is where the copy of one blob (a layer or configuration)
// stands: Current of Total bytes (Total -1 when unknown).
type BlobProgress struct {
	Event   BlobEvent
	Digest  string
	Current int64
	Total   int64
}

// PushOptions are the parameters of PushImage.
type PushOptions struct {
	// Destination is the registry reference to push to; "" pushes to the source name.
	Destination string
	// TLSVerify, when not nil, overrides the registries configuration.
	TLSVerify *bool
	// Auth are the client's credentials, if any.
	Auth *RegistryAuth
	// Format forces the manifest format: "oci", "v2s2" (Docker schema 2) or "" to keep it.
	Format string
	// CompressionFormat is "gzip" (default), "zstd" or "zstd:chunked".
	CompressionFormat string
	// RemoveSignatures drops signatures of the source image.
	RemoveSignatures bool
	// Progress receives human-readable progress text; nil discards it.
	Progress io.Writer
	// Blobs, when set, receives each blob's progress as it is copied: the
	// first call means the registry accepted the connection.
	Blobs func(BlobProgress)
	// Retries and RetryDelay: see TransferRetries.
	TransferRetries
}

// ImportOptions are the parameters of ImagesImport.
type ImportOptions struct {
	// Changes are Dockerfile-style instructions applied to the new image's
	// configuration (CMD, ENTRYPOINT, ENV, WORKDIR, LABEL, EXPOSE, USER, VOLUME,
	// STOPSIGNAL, ONBUILD is refused).
	Changes []string
	// Message is recorded as the comment of the image's history entry.
	Message string
	// Reference names the new image; "" leaves it untagged.
	Reference string
	// OS, Arch and Variant are recorded in the image configuration
	// (default: the engine's platform).
	OS, Arch, Variant string
}

// ExportOptions are the parameters of ExportImage and ExportImages.
type ExportOptions struct {
	// Format is "docker-archive", "oci-archive", "oci-dir" or "docker-dir"
	// (directories are sent as tar streams).
	Format string
	// Compress compresses layers (directory formats only, as in Podman).
	Compress bool
	// OCIAcceptUncompressedLayers keeps uncompressed layers in OCI output.
	OCIAcceptUncompressedLayers bool
}

// Export formats.
const (
	FormatDockerArchive = "docker-archive"
	FormatOCIArchive    = "oci-archive"
	FormatOCIDir        = "oci-dir"
	FormatDockerDir     = "docker-dir"
)

// LoadOptions choose how a load names the images it stores.
type LoadOptions struct {
	// DockerHubShortNames names an image whose name in a docker-archive
	// has no registry ("alpine:3") as dockerd does, on Docker Hub
	// (docker.io/library/alpine:3); without it the name goes under
	// localhost/, as Podman loads it.
	DockerHubShortNames bool
}

// ImageTransfer moves images in and out of the local store: registries
// (pull, push), archives (load, export), rootfs tarballs (import) and other
// engines (scp).
type ImageTransfer interface {
	// Pull copies an image from a registry into the store and returns the IDs
	// of the images pulled.
	Pull(ctx context.Context, opts PullOptions) ([]string, error)
	// Push copies a local image to a registry.
	Push(ctx context.Context, source string, opts PushOptions) (manifestDigest string, err error)
	// Load reads a docker-archive or oci-archive (optionally gzip, bzip2,
	// xz or zstd compressed) with one or more images and stores them all, or
	// none. It returns the loaded names (the image ID for an untagged image).
	Load(ctx context.Context, archive io.Reader, opts LoadOptions) ([]string, error)
	// LoadFile is Load of an archive on the engine host: path must be
	// absolute; a path that does not exist is ErrNoSuchPath.
	LoadFile(ctx context.Context, path string) ([]string, error)
	// Import creates a one-layer image from a rootfs tarball and returns its ID.
	Import(ctx context.Context, rootfs io.Reader, opts ImportOptions) (string, error)
	// ImportURL is Import of a tarball fetched from an http(s) URL.
	ImportURL(ctx context.Context, url string, opts ImportOptions) (string, error)
	// Export writes the named images in opts.Format. The returned reader is
	// the complete archive; closing it frees its temporary storage.
	Export(ctx context.Context, names []string, opts ExportOptions) (io.ReadCloser, error)
	// Scp copies a local image to another local name, or to another engine
	// ("tcp://host:port::[name]", "http://host:port::[name]",
	// "unix:///path::[name]"). It returns the name or ID the destination
	// loaded.
	Scp(ctx context.Context, source, destination string) (string, error)
	// Search asks registries for images whose names hold a term, or lists
	// a repository's tags (SearchOptions.ListTags).
	Search(ctx context.Context, opts SearchOptions) ([]SearchResult, error)
	// Distribution reads a reference's manifest from its registry (short
	// names through the registries configuration) without pulling it.
	Distribution(ctx context.Context, ref string, opts DistributionOptions) (*Distribution, error)
	// CheckLogin asks registry ("host[:port]") whether it takes the
	// credential: nil when it does, ErrUnauthorized when it refuses it.
	// tlsVerify as for a pull.
	CheckLogin(ctx context.Context, registry string, cred RegistryCredential, tlsVerify *bool) error
}
