package system

import (
	"context"
	"fmt"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
)

// DiskUsage implements core.System: image sizes from one read of the image
// store, container sizes from the container backend, volume sizes by
// walking each volume's files.
func (s *Service) DiskUsage(ctx context.Context) (*core.DiskUsageReport, error) {
	images, err := s.store.DiskUsage(ctx)
	if err != nil {
		return nil, err
	}
	report := &core.DiskUsageReport{
		ImagesSize: images.TotalSize,
		Images:     images.Images,
		Containers: []*core.ContainerDiskUsage{},
		Volumes:    []*core.VolumeDiskUsage{},
	}
	imageSize := make(map[string]int64, len(images.Images))
	for _, img := range images.Images {
		imageSize[img.ImageID] = img.Size
	}
	if s.cfg.Containers != nil {
		// Sizes come from the image sizes above and each writable layer:
		// the container listing's sizes would read every image again.
		list, err := s.cfg.Containers.List(ctx, core.ListContainersOptions{All: true})
		if err != nil {
			return nil, fmt.Errorf("listing containers: %w", err)
		}
		rwSizes, err := s.store.WritableLayerSizes()
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			entry := &core.ContainerDiskUsage{
				ContainerID: c.ID,
				Image:       c.ImageID,
				Command:     c.Command,
				Created:     c.Created,
				Status:      c.State,
			}
			if len(c.Names) > 0 {
				entry.Names = c.Names[0]
			}
			entry.RWSize = rwSizes[c.ID]
			entry.Size = imageSize[c.ImageID] + entry.RWSize
			report.Containers = append(report.Containers, entry)
		}
	}
	if s.cfg.Volumes == nil {
		return report, nil
	}
	volumes, err := s.cfg.Volumes.List(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	byContainer := map[string]*core.ContainerDiskUsage{}
	for _, c := range report.Containers {
		byContainer[c.ContainerID] = c
	}
	for _, v := range volumes {
		size, err := imagestore.TreeSize(v.Mountpoint, imagestore.RegularFile)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		entry := &core.VolumeDiskUsage{VolumeName: v.Name, Size: size}
		var users []string
		if s.cfg.VolumeUsers != nil {
			if users, err = s.cfg.VolumeUsers.ContainersUsingVolume(ctx, v.Name); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		// Links counts every container that uses the volume, running or
		// not, as Podman 4.3.1 does (two created containers: LINKS 2).
		entry.Links = len(users)
		for _, id := range users {
			if c := byContainer[id]; c != nil {
				c.LocalVolumes++
			}
		}
		if len(users) == 0 {
			entry.ReclaimableSize = size
		}
		report.Volumes = append(report.Volumes, entry)
	}
	return report, nil
}
