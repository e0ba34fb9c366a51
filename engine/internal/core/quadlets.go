package core

import (
	"context"
	"errors"
	"io"
)

// ErrNoSuchQuadlet: no installed quadlet has the given name (404).
var ErrNoSuchQuadlet = errors.New("no such quadlet")

// Quadlets keeps quadlet units (Podman's systemd-style .container, .pod,
// .volume, .network, .kube, .image and .build files) in the engine's quadlet
// directory. Units are validated and kept, not activated.
type Quadlets interface {
	// Install unpacks a tar archive of one quadlet unit and the files it
	// references. Invalid units are ErrInvalidArgument naming file, line
	// and key; a taken name without Replace is ErrNameInUse.
	Install(ctx context.Context, archive io.Reader, opts QuadletInstallOptions) (QuadletInstallReport, error)
	// List answers the installed quadlets passing the filters (name, status, pod).
	List(ctx context.Context, filters map[string][]string) ([]QuadletListEntry, error)
	// Exists answers nil when the quadlet is installed, else ErrNoSuchQuadlet.
	Exists(ctx context.Context, name string) error
	// Print answers the quadlet's unit file.
	Print(ctx context.Context, name string) (string, error)
	// Remove removes quadlets and the files installed with them.
	Remove(ctx context.Context, names []string, opts QuadletRemoveOptions) (QuadletRemoveReport, error)
}

// QuadletInstallOptions are InstallQuadlets' query parameters.
type QuadletInstallOptions struct {
	// Replace replaces an installed quadlet of the same name.
	Replace bool
}

// QuadletInstallReport is InstallQuadlets' answer: the archive path of
// every installed file to where it was installed, and per-file errors.
type QuadletInstallReport struct {
	InstalledQuadlets map[string]string `json:"InstalledQuadlets"`
	QuadletErrors     map[string]string `json:"QuadletErrors"`
}

// QuadletListEntry is one quadlet as Podman's ListQuadlet describes it.
type QuadletListEntry struct {
	Name     string `json:"Name"`
	UnitName string `json:"UnitName"`
	Path     string `json:"Path"`
	Status   string `json:"Status"`
	App      string `json:"App"`
	Pod      string `json:"Pod"`
}

// QuadletRemoveOptions are RemoveQuadlet(s)' query parameters.
type QuadletRemoveOptions struct {
	// All removes every installed quadlet.
	All bool
	// Force removes running quadlets too (none runs: units are not activated).
	Force bool
	// Ignore skips names that are not installed.
	Ignore bool
}

// QuadletRemoveReport is RemoveQuadlet(s)' answer.
type QuadletRemoveReport struct {
	Removed []string          `json:"Removed"`
	Errors  map[string]string `json:"Errors"`
}
