package core

import (
	"context"
	"io"
	"time"
)

// BuildSecret is a secret a build's RUN steps may mount with
// --mount=type=secret,id=ID. Its content is read from Source, a file inside
// the build context that is never copied into any layer.
type BuildSecret struct {
	ID     string
	Source string
}

// BuildNetwork is the network namespace of RUN steps.
type BuildNetwork string

// Build networks.
const (
	// BuildNetworkPrivate gives each RUN its own network namespace (loopback only).
	BuildNetworkPrivate BuildNetwork = "private"
	// BuildNetworkHost runs RUN steps in the engine's network namespace.
	BuildNetworkHost BuildNetwork = "host"
)

// BuildOptions are the parameters of a build.
type BuildOptions struct {
	// Containerfiles are paths inside the context, tried in order when
	// empty: Containerfile, then Dockerfile. Several are concatenated.
	Containerfiles []string
	// Tags name the built image (short names go under localhost/).
	Tags []string
	// BuildArgs override ARG defaults.
	BuildArgs map[string]string
	// Labels ("key=value") are added to the final image's configuration.
	Labels []string
	// Annotations ("key=value") are added to the final image's manifest.
	Annotations []string
	// Target is the last stage built; "" builds the last stage.
	Target string
	// PullPolicy decides whether FROM images are pulled.
	PullPolicy PullPolicy
	// PullRetries is how many times a FROM pull that failed for a reason
	// other than a definitive answer (not found, refused credentials, a
	// bad reference) is tried again, PullRetryDelay apart.
	PullRetries    int
	PullRetryDelay time.Duration
	// Auth are the client's registry credentials for pulling FROM (and
	// COPY --from) images; nil means none.
	Auth *RegistryAuth
	// TLSVerify, when not nil, overrides the registries configuration for
	// those pulls.
	TLSVerify *bool
	// NoCache rebuilds every step without looking at earlier results.
	NoCache bool
	// Layers keeps an intermediate image per instruction, the layer cache.
	Layers bool
	// Format is "oci" or "docker": the manifest and configuration format.
	Format string
	// Network is the network namespace of RUN steps.
	Network BuildNetwork
	// SeccompProfilePath is the system call filter of RUN steps: "" (the
	// engine's default profile), "unconfined", or a profile file, whose
	// text the builder reads once into SeccompProfile.
	SeccompProfilePath string
	SeccompProfile     []byte
	// ExtraHosts ("name:ip") are added to /etc/hosts of RUN steps.
	ExtraHosts []string
	// Secrets may be mounted by RUN steps.
	Secrets []BuildSecret
	// CPUPeriod, CPUQuota, Memory and ShmSize limit RUN steps (0 = unset;
	// ShmSize 0 = the engine's default).
	CPUPeriod uint64
	CPUQuota  int64
	Memory    int64
	ShmSize   int64
	// Ulimits ("nofile=soft:hard") apply to RUN steps.
	Ulimits []string
	// CapAdd and CapDrop adjust the capabilities of RUN steps.
	CapAdd, CapDrop []string
	// Devices are given to RUN steps: host devices as --device takes them
	// ("source[:destination][:permissions]") or CDI devices
	// ("vendor.com/class=name").
	Devices []string
	// DNSServers, DNSSearch and DNSOptions shape resolv.conf of RUN steps.
	DNSServers, DNSSearch, DNSOptions []string
	// HTTPProxy passes the engine's proxy variables (http_proxy, ...) to RUN steps.
	HTTPProxy bool
	// IdentityLabel adds the io.buildah.version label as Buildah does.
	IdentityLabel bool
	// Quiet leaves step output out of the progress stream.
	Quiet bool
	// Progress receives the build's output (steps, RUN output); nil discards it.
	Progress io.Writer
}

// Builder builds images from a Containerfile and a context.
type Builder interface {
	// Build reads the context, a tar stream (optionally gzip compressed),
	// and returns the ID of the built image ("sha256:...").
	Build(ctx context.Context, contextTar io.Reader, opts BuildOptions) (string, error)
	// BuildDir builds from a context directory on the engine's host, given
	// as an absolute path.
	BuildDir(ctx context.Context, dir string, opts BuildOptions) (string, error)
	// PruneCache removes unused build cache: the untagged images builds keep
	// for their steps and, with All, the RUN --mount=type=cache directories.
	PruneCache(ctx context.Context, opts BuildCachePruneOptions) (BuildCachePruneReport, error)
}

// BuildCachePruneOptions select the build cache entries PruneCache removes.
type BuildCachePruneOptions struct {
	// All removes every unused entry: the step images under tagged images
	// (their layers stay, in use by those images) and the cache mount
	// directories too. Without it only dangling step images go: those no
	// image is built on.
	All bool
	// Filters narrow the selection; until (a timestamp or a duration before
	// now) is the one filter: it keeps the entries created after it, and
	// cache directories changed after it.
	Filters map[string][]string
}

// BuildCachePruneReport is what PruneCache removed, in Docker's wire shape.
type BuildCachePruneReport struct {
	// CachesDeleted are the removed step images' IDs and cache directories' names.
	CachesDeleted []string
	// SpaceReclaimed is the bytes freed: the layers only the removed images
	// held, and the removed directories' contents.
	SpaceReclaimed uint64
}
