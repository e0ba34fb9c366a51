package imagestore

import (
	"context"
	"fmt"

	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/core"
)

// Check verifies the store's layers, images and containers and, when asked,
// removes what is damaged (images and layers; containers only with RepairLossy).
// A kill -9 in the middle of a pull or load leaves incomplete layers behind;
// Check with Repair clears them.
func (s *Store) Check(ctx context.Context, opts core.SystemCheckOptions) (*core.SystemCheckReport, error) {
	checkOpts := storage.CheckEverything()
	if opts.Quick {
		checkOpts = storage.CheckMost()
	}
	checkOpts.LayerUnreferencedMaximumAge = opts.UnreferencedLayerMaximumAge
	return s.check(ctx, checkOpts, opts)
}

// RepairOnStart runs the metadata-only checks (no layer is read or mounted,
// so it stays fast on a big store) and repairs what they find: what a kill -9
// in the middle of a pull or load leaves behind.
func (s *Store) RepairOnStart(ctx context.Context) (*core.SystemCheckReport, error) {
	checkOpts := &storage.CheckOptions{LayerData: true, ImageData: true, ContainerData: true}
	report, err := s.check(ctx, checkOpts, core.SystemCheckOptions{Repair: true})
	if err != nil {
		return nil, err
	}
	if err := s.store.GarbageCollect(); err != nil {
		s.logger.Warn("storage garbage collection failed", "error", err)
	}
	return report, nil
}

// check runs storage's check with checkOpts and repairs as opts allow.
func (s *Store) check(ctx context.Context, checkOpts *storage.CheckOptions, opts core.SystemCheckOptions) (*core.SystemCheckReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cache.invalidate()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	report, err := s.store.Check(checkOpts)
	if err != nil {
		return nil, fmt.Errorf("checking storage: %w", err)
	}
	s.dropSymlinkModeDiffs(&report)
	out := &core.SystemCheckReport{
		Layers:     errorStrings(report.Layers),
		ROLayers:   errorStrings(report.ROLayers),
		Images:     errorStrings(report.Images),
		ROImages:   errorStrings(report.ROImages),
		Containers: errorStrings(report.Containers),
	}
	out.Errors = len(report.Layers)+len(report.ROLayers)+len(report.Images)+len(report.ROImages)+len(report.Containers) > 0
	if !out.Errors || !(opts.Repair || opts.RepairLossy) {
		return out, nil
	}

	// Remember names before the repair removes them, for the report.
	imageNames := map[string][]string{}
	for id := range report.Images {
		if img, err := s.store.Image(id); err == nil {
			imageNames[id] = append([]string{}, img.Names...)
		} else {
			imageNames[id] = []string{}
		}
	}
	containerNames := map[string]string{}
	for id := range report.Containers {
		if c, err := s.store.Container(id); err == nil && len(c.Names) > 0 {
			containerNames[id] = c.Names[0]
		} else {
			containerNames[id] = ""
		}
	}
	repairErrs := s.store.Repair(report, &storage.RepairOptions{RemoveContainers: opts.RepairLossy})
	if len(repairErrs) > 0 {
		return out, fmt.Errorf("repairing storage: %w", repairErrs[0])
	}
	for id := range report.Layers {
		if _, err := s.store.Layer(id); err != nil {
			out.RemovedLayers = append(out.RemovedLayers, id)
		}
	}
	for id, names := range imageNames {
		if _, err := s.store.Image(id); err != nil {
			if out.RemovedImages == nil {
				out.RemovedImages = map[string][]string{}
			}
			out.RemovedImages[id] = names
		}
	}
	for id, name := range containerNames {
		if _, err := s.store.Container(id); err != nil {
			if out.RemovedContainers == nil {
				out.RemovedContainers = map[string]string{}
			}
			out.RemovedContainers[id] = name
		}
	}
	return out, nil
}

// errorStrings turns a check report section into text.
func errorStrings(in map[string][]error) map[string][]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string][]string, len(in))
	for id, errs := range in {
		for _, err := range errs {
			out[id] = append(out[id], err.Error())
		}
	}
	return out
}
