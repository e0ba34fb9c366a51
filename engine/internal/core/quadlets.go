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
// directory. Units are validated and kept; activated ones are also turned
// into the engine objects they describe, and torn down with them.
type Quadlets interface {
	// Install unpacks a tar archive (or multipart body) of one quadlet
	// unit and the files it references. Invalid units are
	// ErrInvalidArgument naming file, line and key; so is a taken name
	// without Replace, as Podman answers it (400).
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
	// Activate turns the unit into the engine objects it describes; nil
	// takes the engine's default (its --activate-quadlets flag).
	Activate *bool
	// ReloadSystemd hands the unit to systemd (its generated service and a
	// daemon-reload), only where systemd runs.
	ReloadSystemd bool
	// MultipartBoundary, when set, says the archive is a multipart/form-data
	// body with this boundary instead of a tar: each part with a file name
	// is one file (named by the name's last element), as Podman's install
	// reads such a body.
	MultipartBoundary string
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
	// Force removes active quadlets too, tearing down what their
	// activation created; without it an active quadlet is an
	// ErrInvalidArgument naming force (Podman's 400).
	Force bool
	// Ignore reports names that are not installed as removed, as Podman's
	// report does, instead of as errors.
	Ignore bool
	// ReloadSystemd removes the quadlet's generated service from systemd
	// (a daemon-reload), only where systemd runs.
	ReloadSystemd bool
}

// QuadletRemoveReport is RemoveQuadlet(s)' answer.
type QuadletRemoveReport struct {
	Removed []string          `json:"Removed"`
	Errors  map[string]string `json:"Errors"`
	// Causes holds the error behind each entry of Errors, so a single
	// removal is answered with its status (404, 409, ...).
	Causes map[string]error `json:"-"`
}
