package system

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// StateDB is what the system check reads and repairs in the state database;
// *state.DB implements it.
type StateDB interface {
	IntegrityCheck(ctx context.Context, quick bool) ([]string, error)
	ListExecSessions(ctx context.Context, containerID string) ([]state.ExecSessionRecord, error)
	DeleteExecSession(ctx context.Context, id string) error
}

// Check implements core.System: containers/storage's check of layers,
// images and containers, then the state database's: SQLite's integrity,
// container records whose storage is gone, exec sessions of containers that
// do not exist, volume records whose directory is gone and volume
// directories without a record. With Repair, damaged images and layers go
// (storage's repair), containers without storage are removed (they cannot
// run again), orphan exec sessions are deleted and missing volume
// directories recreated empty; with RepairLossy, unreferenced volume
// directories are removed too.
func (s *Service) Check(ctx context.Context, opts core.SystemCheckOptions) (*core.SystemCheckReport, error) {
	report, err := s.store.Check(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := s.checkState(ctx, opts, report); err != nil {
		return nil, err
	}
	return report, nil
}

// checkState adds the state database's findings (and repairs) to report.
func (s *Service) checkState(ctx context.Context, opts core.SystemCheckOptions, report *core.SystemCheckReport) error {
	problem := func(key, what string) {
		if report.State == nil {
			report.State = map[string][]string{}
		}
		report.State[key] = append(report.State[key], what)
		report.Errors = true
	}
	repaired := func(key, what string) {
		if report.RepairedState == nil {
			report.RepairedState = map[string]string{}
		}
		report.RepairedState[key] = what
	}
	if s.cfg.State != nil {
		found, err := s.cfg.State.IntegrityCheck(ctx, opts.Quick)
		if err != nil {
			return err
		}
		for _, p := range found {
			problem("database", p)
		}
	}
	known := map[string]bool{}
	if s.cfg.Containers != nil {
		list, err := s.cfg.Containers.List(ctx, core.ListContainersOptions{All: true})
		if err != nil {
			return fmt.Errorf("listing containers: %w", err)
		}
		for _, c := range list {
			known[c.ID] = true
			if _, err := s.store.Storage().Container(c.ID); !errors.Is(err, storage.ErrContainerUnknown) {
				continue
			}
			if report.Containers == nil {
				report.Containers = map[string][]string{}
			}
			report.Containers[c.ID] = append(report.Containers[c.ID], "the container's storage is missing")
			report.Errors = true
			if !opts.Repair && !opts.RepairLossy {
				continue
			}
			if err := s.cfg.Containers.Remove(ctx, c.ID, core.RemoveContainerOptions{Force: true}); err != nil {
				return fmt.Errorf("removing container %s without storage: %w", c.ID, err)
			}
			if report.RemovedContainers == nil {
				report.RemovedContainers = map[string]string{}
			}
			report.RemovedContainers[c.ID] = "its storage was missing"
		}
	}
	if s.cfg.State != nil && s.cfg.Containers != nil {
		sessions, err := s.cfg.State.ListExecSessions(ctx, "")
		if err != nil {
			return err
		}
		for _, e := range sessions {
			if known[e.ContainerID] {
				continue
			}
			key := "exec session " + e.ID
			problem(key, "its container "+e.ContainerID+" does not exist")
			if opts.Repair || opts.RepairLossy {
				if err := s.cfg.State.DeleteExecSession(ctx, e.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
					return err
				}
				repaired(key, "deleted")
			}
		}
	}
	return s.checkVolumes(ctx, opts, problem, repaired)
}

// checkVolumes compares volume records with the volume directories.
func (s *Service) checkVolumes(ctx context.Context, opts core.SystemCheckOptions, problem, repaired func(key, what string)) error {
	if s.cfg.Volumes == nil {
		return nil
	}
	volumes, err := s.cfg.Volumes.List(ctx, nil)
	if err != nil {
		return fmt.Errorf("listing volumes: %w", err)
	}
	recorded := map[string]bool{}
	for _, v := range volumes {
		recorded[v.Name] = true
		if _, err := os.Stat(v.Mountpoint); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		key := "volume " + v.Name
		problem(key, "its directory "+v.Mountpoint+" is missing")
		if opts.Repair || opts.RepairLossy {
			if err := os.MkdirAll(v.Mountpoint, 0o755); err != nil {
				return err
			}
			repaired(key, "directory recreated, empty")
		}
	}
	if s.cfg.VolumePath == "" {
		return nil
	}
	entries, err := os.ReadDir(s.cfg.VolumePath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, entry := range entries {
		if !entry.IsDir() || recorded[entry.Name()] {
			continue
		}
		key := "volume directory " + entry.Name()
		problem(key, "no volume has this directory")
		if opts.RepairLossy {
			if err := os.RemoveAll(filepath.Join(s.cfg.VolumePath, entry.Name())); err != nil {
				return err
			}
			repaired(key, "removed")
		}
	}
	return nil
}
