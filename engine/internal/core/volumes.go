package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// Volume errors (see errors.go for the mapping rules).
var (
	// ErrNoSuchVolume: no volume has the given name (404).
	ErrNoSuchVolume = errors.New("no such volume")
	// ErrVolumeInUse: a volume is used by a container and cannot be removed without force (409).
	ErrVolumeInUse = errors.New("volume is being used")
)

// Volume is a volume as Podman's VolumeConfigResponse describes it.
type Volume struct {
	Name        string            `json:"Name"`
	Driver      string            `json:"Driver"`
	Mountpoint  string            `json:"Mountpoint"`
	CreatedAt   time.Time         `json:"CreatedAt"`
	Labels      map[string]string `json:"Labels"`
	Scope       string            `json:"Scope"`
	Options     map[string]string `json:"Options"`
	UID         int               `json:"UID,omitempty"`
	GID         int               `json:"GID,omitempty"`
	Anonymous   bool              `json:"Anonymous,omitempty"`
	MountCount  uint              `json:"MountCount"`
	NeedsCopyUp bool              `json:"NeedsCopyUp,omitempty"`
	NeedsChown  bool              `json:"NeedsChown,omitempty"`
}

// VolumeCreateOptions is a volume creation request (Podman's body of
// POST /volumes/create). An empty Name gets a random 64-hex name.
type VolumeCreateOptions struct {
	Name    string            `json:"Name"`
	Driver  string            `json:"Driver"`
	Label   map[string]string `json:"Label"`
	Labels  map[string]string `json:"Labels"`
	Options map[string]string `json:"Options"`
	// IgnoreIfExists answers an existing volume of the name instead of a
	// 409 (podman volume create --ignore, Podman 5 on).
	IgnoreIfExists bool `json:"IgnoreIfExists,omitempty"`
	// UID and GID own the new volume's directory (Podman 6's --uid,
	// --gid; the options uid= and gid= do the same).
	UID       *int `json:"UID,omitempty"`
	GID       *int `json:"GID,omitempty"`
	Anonymous bool `json:"-"`
	// OnCreate, when set, is called with the new volume's name before
	// Create returns and before any other change can see the volume (the
	// container backend reserves it for the container being created).
	OnCreate func(name string) `json:"-"`
}

// NamedVolume is one volume a container mounts (the creation spec's
// "volumes"): an empty Name asks for a new anonymous volume.
type NamedVolume struct {
	Name        string   `json:"Name"`
	Dest        string   `json:"Dest"`
	Options     []string `json:"Options,omitempty"`
	IsAnonymous bool     `json:"IsAnonymous,omitempty"`
	// SubPath (Podman 5 and 6's --mount type=volume,...,subpath=DIR,
	// Docker's VolumeOptions.Subpath): only that directory or file of the
	// volume is mounted, a path relative to the volume's root that must
	// exist when the container starts (see CleanVolumeSubPath).
	SubPath string `json:"SubPath,omitempty"`
}

// CleanVolumeSubPath checks a volume subpath and answers it relative to the
// volume's root: a leading "/" means the volume's root (as Podman joins
// it), and nothing may lead above the root or be empty.
func CleanVolumeSubPath(sub string) (string, error) {
	rel := strings.TrimLeft(sub, "/")
	if strings.ContainsRune(sub, 0) || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("subpath %q must be a path inside the volume", sub)
	}
	return filepath.Clean(rel), nil
}

// Volumes is the volume domain of the engine.
type Volumes interface {
	// Create creates a volume; ErrNameInUse when the name is taken.
	Create(ctx context.Context, opts VolumeCreateOptions) (*Volume, error)
	// Inspect returns a volume; ErrNoSuchVolume when there is none.
	Inspect(ctx context.Context, name string) (*Volume, error)
	// List returns the volumes matching filters (name, label, driver, dangling).
	List(ctx context.Context, filters map[string][]string) ([]*Volume, error)
	// Remove removes a volume; one used by containers only with force,
	// which removes those containers first (ErrVolumeInUse otherwise).
	Remove(ctx context.Context, name string, force bool) error
	// RemoveForced is Remove with force, stopping the containers that use
	// the volume with that timeout (podman volume rm -f --time) before it
	// kills them.
	RemoveForced(ctx context.Context, name string, timeout uint) error
	// Prune removes every volume no container uses that matches filters
	// (label, label!, until).
	Prune(ctx context.Context, filters map[string][]string) ([]PruneReport, error)
	// PruneDryRun answers what Prune would remove, removing nothing
	// (Podman 6's volume prune --dry-run).
	PruneDryRun(ctx context.Context, filters map[string][]string) ([]PruneReport, error)
	// MarkCopiedUp clears a volume's NeedsCopyUp once it got its content.
	MarkCopiedUp(ctx context.Context, name string) error
	// Mount mounts a volume that has mount options (type=tmpfs, o=bind)
	// unless it is mounted; a plain volume needs nothing.
	Mount(ctx context.Context, name string) error
	// Unmount undoes Mount (a no-op for a volume that is not mounted).
	Unmount(ctx context.Context, name string) error
	// Export writes the volume's content to w as an uncompressed tar.
	Export(ctx context.Context, name string, w io.Writer) error
	// Import merges a tar's content into the volume (the tar's entries win).
	// A malformed tar or an entry that would land outside the volume is an
	// ErrInvalidArgument, and then nothing of the tar is in the volume.
	Import(ctx context.Context, name string, r io.Reader) error
}

// VolumeUsers is what the volume backend needs from the container backend.
type VolumeUsers interface {
	// ContainersUsingVolume returns the IDs of the containers that mount the volume.
	ContainersUsingVolume(ctx context.Context, name string) ([]string, error)
	// RemoveContainer stops and removes a container.
	RemoveContainer(ctx context.Context, containerID string) error
	// RemoveContainerWithin stops a container, killing it after timeout
	// seconds, and removes it.
	RemoveContainerWithin(ctx context.Context, containerID string, timeout uint) error
}
