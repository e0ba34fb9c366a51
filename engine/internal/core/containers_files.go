package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
)

// PathStat describes a path in a container, as Podman sends it base64 JSON
// encoded in the X-Docker-Container-Path-Stat header.
type PathStat struct {
	Name    string      `json:"name"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mtime"`
	IsDir   bool        `json:"isDir"`
	// LinkTarget is the path in the container the request resolved to
	// (symbolic links followed), with the caller's trailing "/" or "/."
	// kept.
	LinkTarget string `json:"linkTarget"`
}

// PutArchiveOptions tune PutArchive.
type PutArchiveOptions struct {
	// CopyUIDGID gives every extracted entry the container user's UID and
	// GID instead of the owner recorded in the archive.
	CopyUIDGID bool
	// NoOverwriteDirNonDir refuses to replace a directory with a
	// non-directory, or a non-directory with a directory.
	NoOverwriteDirNonDir bool
	// Rename maps an entry name (or a leading directory of it) to a new name.
	Rename map[string]string
}

// ArchiveStyle is whose rules StatPath and GetArchive follow; the two
// clients rename what they receive differently.
type ArchiveStyle int

const (
	// PodmanArchive (podman cp): every symbolic link of the path is
	// followed; LinkTarget is the resolved path; entries are named after
	// the resolved path, the contents of "DIR/." bare.
	PodmanArchive ArchiveStyle = iota
	// DockerArchive (docker cp): a last component that is a symbolic link
	// is described and archived as the link, unless the path ends in "/"
	// or "/."; entries are named after the path as given, the contents of
	// "DIR/." as "./NAME" under a "./" entry; LinkTarget is set for links
	// only.
	DockerArchive
)

// ContainerArchives copies files in and out of a container (podman cp),
// running or not. Paths resolve inside the container's root filesystem and
// its mounts; symbolic links and ".." never lead outside them. A Containers
// implementation may also implement it.
type ContainerArchives interface {
	// StatPath describes path in the container (ErrNoSuchPath when absent).
	StatPath(ctx context.Context, nameOrID, path string, style ArchiveStyle) (PathStat, error)
	// GetArchive writes path as an uncompressed tar to the writer that
	// start returns, once the path is found: a directory with its name as
	// the first component unless path ends in "/.", a file as itself.
	GetArchive(ctx context.Context, nameOrID, path string, style ArchiveStyle, start func(PathStat) io.Writer) error
	// PutArchive extracts a tar archive (possibly compressed) into the
	// directory path. A malformed archive, or one whose entries would leave
	// the container, is refused (ErrInvalidArgument) before anything is
	// written.
	PutArchive(ctx context.Context, nameOrID, path string, archive io.Reader, opts PutArchiveOptions) error
}

// Change kinds a changes request may name.
const (
	DiffAll       = "all"
	DiffContainer = "container"
	DiffImage     = "image"
)

// ChangesOptions tune Changes.
type ChangesOptions struct {
	// Kind says what the name may be: DiffAll (an image, else a container),
	// DiffContainer or DiffImage.
	Kind string
	// Parent, when set, is the image or container to compare with instead of
	// the layer below.
	Parent string
}

// CommitOptions are the parameters of CommitContainer.
type CommitOptions struct {
	// Reference names the new image ("repo:tag"); "" leaves it untagged.
	Reference string
	// Author and Comment are recorded in the image.
	Author, Comment string
	// Changes are Dockerfile-style instructions applied to the configuration.
	Changes []string
	// Pause freezes a running container while its changes are read.
	Pause bool
	// Format is "oci" or "docker".
	Format string
	// Squash makes the image a single layer.
	Squash bool
	// Config, when set, is merged over the new image's configuration
	// before Changes are applied (Podman 5's JSON body of the commit).
	Config *CommitConfig
}

// CommitConfig is the image configuration a commit merges over the
// container's, in Docker's Schema2Config shape (what podman commit --config
// sends): a non-empty string or list replaces the value, Env entries replace
// the variables they name, and Labels, ExposedPorts and Volumes are added.
// The members of a container's runtime settings that an image configuration
// does not keep are refused when set (Check).
type CommitConfig struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	Healthcheck  *HealthConfig       `json:"Healthcheck,omitempty"`
	Volumes      map[string]struct{} `json:"Volumes,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	OnBuild      []string            `json:"OnBuild,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	StopSignal   string              `json:"StopSignal,omitempty"`
	Shell        []string            `json:"Shell,omitempty"`

	Hostname        string `json:"Hostname,omitempty"`
	Domainname      string `json:"Domainname,omitempty"`
	AttachStdin     bool   `json:"AttachStdin,omitempty"`
	AttachStdout    bool   `json:"AttachStdout,omitempty"`
	AttachStderr    bool   `json:"AttachStderr,omitempty"`
	Tty             bool   `json:"Tty,omitempty"`
	OpenStdin       bool   `json:"OpenStdin,omitempty"`
	StdinOnce       bool   `json:"StdinOnce,omitempty"`
	ArgsEscaped     bool   `json:"ArgsEscaped,omitempty"`
	Image           string `json:"Image,omitempty"`
	NetworkDisabled bool   `json:"NetworkDisabled,omitempty"`
	MacAddress      string `json:"MacAddress,omitempty"`
	StopTimeout     *int   `json:"StopTimeout,omitempty"`
}

// Check refuses, naming the member, what an image made in format ("oci",
// "docker"; "" is oci) cannot keep.
func (c *CommitConfig) Check(format string) error {
	if c == nil {
		return nil
	}
	notKept := errors.New("a container setting that an image configuration does not keep")
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Hostname", c.Hostname != ""}, {"Domainname", c.Domainname != ""},
		{"AttachStdin", c.AttachStdin}, {"AttachStdout", c.AttachStdout}, {"AttachStderr", c.AttachStderr},
		{"Tty", c.Tty}, {"OpenStdin", c.OpenStdin}, {"StdinOnce", c.StdinOnce}, {"ArgsEscaped", c.ArgsEscaped},
		{"Image", c.Image != ""}, {"NetworkDisabled", c.NetworkDisabled}, {"MacAddress", c.MacAddress != ""},
		{"StopTimeout", c.StopTimeout != nil},
	} {
		if f.set {
			return InvalidArgument("config."+f.name, notKept)
		}
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return InvalidArgument("config.Env", fmt.Errorf("%q is not KEY=VALUE", kv))
		}
	}
	if format == "docker" {
		return nil
	}
	dockerOnly := errors.New("only kept by the docker image format (format=docker)")
	switch {
	case c.Healthcheck != nil:
		return InvalidArgument("config.Healthcheck", dockerOnly)
	case len(c.OnBuild) > 0:
		return InvalidArgument("config.OnBuild", dockerOnly)
	case len(c.Shell) > 0:
		return InvalidArgument("config.Shell", dockerOnly)
	}
	return nil
}

// ContainerCommits makes images from containers. A Containers
// implementation may also implement it.
type ContainerCommits interface {
	// Commit stores the container's changes as a new image on top of its
	// image, and returns the new image's ID.
	Commit(ctx context.Context, nameOrID string, opts CommitOptions) (string, error)
}
