package core

import (
	"context"
	"time"
)

// DiskUsageReport is what GET /system/df answers, in Podman's wire shape
// (podman system df and df -v decode it).
type DiskUsageReport struct {
	// ImagesSize is the space all images take, each layer counted once.
	ImagesSize int64                 `json:"ImagesSize"`
	Images     []*ImageDiskUsage     `json:"Images"`
	Containers []*ContainerDiskUsage `json:"Containers"`
	Volumes    []*VolumeDiskUsage    `json:"Volumes"`
}

// ImageDiskUsage is one repository tag of an image (an untagged image is
// <none>:<none>): its size, the part of it in layers other images use too
// (SharedSize) and the rest (UniqueSize), and how many containers use it.
type ImageDiskUsage struct {
	Repository string    `json:"Repository"`
	Tag        string    `json:"Tag"`
	ImageID    string    `json:"ImageID"`
	Created    time.Time `json:"Created"`
	Size       int64     `json:"Size"`
	SharedSize int64     `json:"SharedSize"`
	UniqueSize int64     `json:"UniqueSize"`
	Containers int       `json:"Containers"`
}

// ImagesDiskUsage is the image store's part of a disk usage report.
type ImagesDiskUsage struct {
	// TotalSize counts every layer once, plus each image's metadata.
	TotalSize int64
	Images    []*ImageDiskUsage
}

// ContainerDiskUsage is one container: its writable layer (RWSize) and its
// whole root filesystem (Size, the image included).
type ContainerDiskUsage struct {
	ContainerID  string    `json:"ContainerID"`
	Image        string    `json:"Image"`
	Command      []string  `json:"Command"`
	LocalVolumes int       `json:"LocalVolumes"`
	Size         int64     `json:"Size"`
	RWSize       int64     `json:"RWSize"`
	Created      time.Time `json:"Created"`
	Status       string    `json:"Status"`
	Names        string    `json:"Names"`
}

// VolumeDiskUsage is one volume: the bytes of its files, how many running
// containers use it (Links, as Podman counts them), and what removing it
// would free (its size when no container uses it).
type VolumeDiskUsage struct {
	VolumeName      string `json:"VolumeName"`
	Links           int    `json:"Links"`
	Size            int64  `json:"Size"`
	ReclaimableSize int64  `json:"ReclaimableSize"`
}

// SystemPruneOptions select what SystemPrune removes.
type SystemPruneOptions struct {
	// All prunes every image no container uses, not only dangling ones.
	All bool
	// Volumes prunes unused volumes too.
	Volumes bool
	// Filters apply to every kind pruned (label, label!, until).
	Filters map[string][]string
}

// SystemPruneReport is what POST /system/prune answers, in Podman's shape.
type SystemPruneReport struct {
	PodPruneReport        []*PodPruneReport     `json:"PodPruneReport"`
	ContainerPruneReports []*PruneReport        `json:"ContainerPruneReports"`
	ImagePruneReports     []*PruneReport        `json:"ImagePruneReports"`
	NetworkPruneReports   []*NetworkPruneReport `json:"NetworkPruneReports"`
	VolumePruneReports    []*PruneReport        `json:"VolumePruneReports"`
	ReclaimedSpace        uint64                `json:"ReclaimedSpace"`
}

// PodPruneReport is one pruned pod.
type PodPruneReport struct {
	Err string `json:"Err,omitempty"`
	ID  string `json:"Id"`
}

// NetworkPruneReport is one pruned network.
type NetworkPruneReport struct {
	Name  string `json:"Name"`
	Error string `json:"Error,omitempty"`
}

// Pruners are the prune operations of each object kind SystemPrune runs; a
// nil one is a kind the engine does not have (yet). Adding a kind is one
// field here and one line where the engine is assembled.
type Pruners struct {
	Pods       func(ctx context.Context) ([]*PodPruneReport, error)
	Containers func(ctx context.Context, filters map[string][]string) ([]PruneReport, error)
	Images     func(ctx context.Context, opts ImagePruneOptions) ([]PruneReport, error)
	Volumes    func(ctx context.Context, filters map[string][]string) ([]PruneReport, error)
	Networks   func(ctx context.Context, filters map[string][]string) ([]*NetworkPruneReport, error)
}
