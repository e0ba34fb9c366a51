package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/checkpointarchive"
	"github.com/berth-project/berth/engine/internal/backend/resources/network"
	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.ContainerCheckpoints = (*Manager)(nil)

// checkpointDir is where a container's checkpoint lives: beside its other
// persistent files, so that it survives engine restarts and goes with the
// container.
func checkpointDir(rec record) string { return filepath.Join(rec.StaticDir, "checkpoint") }

// Checkpoint dumps a running container with CRIU through the OCI runtime.
// The record says Checkpointing while CRIU works, so that an engine killed
// meanwhile learns at start whether the dump finished (reconcileCheckpoint).
func (m *Manager) Checkpoint(ctx context.Context, nameOrID string, opts core.CheckpointOptions) (core.CheckpointReport, error) {
	var report core.CheckpointReport
	err := m.observedLocked(ctx, "checkpoint", nameOrID, func(ctx context.Context, e *entry) error {
		var err error
		report, err = m.checkpointLocked(ctx, e, opts)
		return err
	})
	return report, err
}

func (m *Manager) checkpointLocked(ctx context.Context, e *entry, opts core.CheckpointOptions) (core.CheckpointReport, error) {
	var report core.CheckpointReport
	rec := m.snapshot(e)
	if rec.State != core.StateRunning {
		return report, fmt.Errorf("container %s is %s; only running containers can be checkpointed: %w", rec.Name, rec.State, core.ErrContainerStateImproper)
	}
	if rec.IsInfra || rec.PauseProcess {
		return report, fmt.Errorf("container %s is the infra container of its pod; checkpoint its members instead: %w", rec.Name, core.ErrStateConflict)
	}
	if len(rec.UIDMap) > 0 {
		// A dump would succeed and end the container's processes, and its
		// restore fail: CRIU restores the container's mounts from inside
		// its user namespace, where the bind mounts' sources under the
		// engine's root and the host's /sys cannot be opened (found by the
		// chaos loop; upstream CRIU and runc have the same gap).
		return report, fmt.Errorf("container %s runs in a user namespace of its own (--userns, --uidmap or its pod's), whose mounts CRIU cannot restore: it is not checkpointed and runs on untouched: %w", rec.Name, core.ErrStateConflict)
	}
	if !opts.TCPEstablished {
		// Refused before CRIU touches the container: a dump that fails
		// half way is not harmless (runtime.ConnectedTCP).
		if pids, err := cgroups.Host().Procs(rec.CgroupPath); err == nil {
			if conns := runtime.ConnectedTCP(pids); len(conns) > 0 {
				return report, fmt.Errorf("checkpoint container %s: it holds connected TCP sockets (%s), which CRIU dumps only with --tcp-established: checkpoint it with tcpEstablished=true; the container runs on untouched",
					rec.Name, strings.Join(conns, "; "))
			}
		}
	}
	dir := checkpointDir(rec)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return report, err
	}
	// The CRIU configuration the container's spec names (written anew:
	// one a crashed restore left behind must not reach this dump).
	criuConf := filepath.Join(rec.Bundle, runtime.CRIUConfigFile)
	if err := runtime.WriteCRIUConfig(criuConf, runtime.CRIUConfig{
		SkipNetworkLock: !opts.TCPEstablished && m.rt.SkipsNetworkLock(),
	}); err != nil {
		return report, err
	}
	defer os.Remove(criuConf)
	nets := checkpointNets(rec)
	if err := m.update(ctx, e, func(r *record) {
		r.Checkpointing = true
		r.Checkpointed = false
		// A checkpoint that stops the container is a client's stop: its
		// restart policy does not start it afresh (its restore, or a
		// start, runs it again), exported or not, as Podman leaves it.
		// A running container's flag is false: undone below if the dump
		// fails, and at start if a kill -9 cut it.
		if !opts.LeaveRunning {
			r.StoppedByUser = true
		}
	}); err != nil {
		return report, err
	}
	start := time.Now()
	// Frozen first (through its cgroup, runtime.FreezeForDump): CRIU then
	// finds the cgroup frozen at once, where freezing it itself polls the
	// freezer in 100 ms steps. CRIU leaves the freezer as it found it, so a
	// container that is to run on (leaveRunning, a failed dump) is thawed
	// here; an engine killed in between thaws it at start
	// (reconcileCheckpointLocked).
	froze := m.rt.FreezeForDump(ctx, rec.ID, true) == nil
	err := m.rt.Checkpoint(ctx, rec.ID, dir, runtime.CheckpointOptions{
		LeaveRunning: opts.LeaveRunning, TCPEstablished: opts.TCPEstablished, FileLocks: opts.FileLocks,
	})
	if froze && (err != nil || opts.LeaveRunning) {
		if rerr := m.rt.FreezeForDump(ctx, rec.ID, false); rerr != nil {
			m.logger.Warn("thaw the container after its dump", "container", rec.ID, "err", rerr)
		}
	}
	report.RuntimeDuration = time.Since(start)
	if err != nil {
		// CRIU resumes the container when a dump fails. The directory
		// keeps dump.log, which the error quotes, when asked to.
		m.update(ctx, e, func(r *record) {
			r.Checkpointing = false
			r.StoppedByUser = false
		})
		if !opts.Keep {
			os.RemoveAll(dir)
		}
		if errors.Is(err, runtime.ErrCheckpointTimeout) {
			// Killed, CRIU let go of the processes it held: they run on
			// unless its SIGKILL reached them (conmon then reports the
			// exit). The dump is not used either way.
			if st, serr := m.rt.State(ctx, rec.ID); serr == nil && (st.Status == "running" || st.Status == "paused") {
				return report, fmt.Errorf("checkpoint container %s: %w; the container runs on", rec.Name, err)
			}
		}
		return report, fmt.Errorf("checkpoint container %s: %w", rec.Name, err)
	}
	if err := saveShm(&rec, dir); err != nil {
		m.logger.Warn("save the checkpointed container's /dev/shm", "container", rec.ID, "err", err)
	}
	if opts.PrintStats {
		if report.CRIUStatistics, err = runtime.ReadStats(filepath.Join(dir, runtime.StatsDump)); err != nil {
			m.logger.Warn("read CRIU statistics", "container", rec.ID, "err", err)
		}
	}
	now := time.Now()
	if err := m.update(ctx, e, func(r *record) {
		r.Checkpointing = false
		r.Checkpointed = true
		r.CheckpointedAt = now
		r.CheckpointPath = dir
		r.CheckpointLog = filepath.Join(dir, runtime.DumpLog)
		r.CheckpointNets = nets
	}); err != nil {
		return report, err
	}
	if !opts.LeaveRunning {
		// CRIU ended the container's processes; conmon records the exit.
		if m.waitExit(ctx, e, time.Now().Add(30*time.Second)) {
			m.cleanupLocked(ctx, e)
			// CRIU's SIGKILL is no failure of the process: like Podman,
			// a checkpointed container shows exit code 0.
			m.update(ctx, e, func(r *record) {
				if r.State == core.StateExited {
					r.ExitCode = 0
				}
			})
		}
	}
	m.emit(ctx, core.EventCheckpoint, m.snapshot(e), nil)
	if opts.Export != nil {
		if err := m.exportCheckpointLocked(ctx, e, opts); err != nil {
			return report, fmt.Errorf("export the checkpoint of container %s: %w", rec.Name, err)
		}
		if !opts.Keep {
			// The checkpoint left with the archive.
			os.RemoveAll(dir)
			m.update(ctx, e, func(r *record) { r.Checkpointed = false })
			return report, nil
		}
	}
	if !opts.Keep {
		os.Remove(filepath.Join(dir, runtime.DumpLog))
		os.Remove(filepath.Join(dir, runtime.StatsDump))
	}
	return report, nil
}

// checkpointNets are the addresses the container has on each network now,
// which a restore asks for again.
func checkpointNets(rec record) map[string]core.PerNetworkOptions {
	if rec.NetSetup == nil || len(rec.NetStatus) == 0 {
		return nil
	}
	out := map[string]core.PerNetworkOptions{}
	for name, opts := range rec.Spec.Networks {
		status, ok := rec.NetStatus[name]
		if !ok {
			continue
		}
		iface, ok := status.Interfaces[opts.InterfaceName]
		if !ok {
			continue
		}
		saved := core.PerNetworkOptions{InterfaceName: opts.InterfaceName, StaticMAC: iface.MacAddress}
		for _, sn := range iface.Subnets {
			saved.StaticIPs = append(saved.StaticIPs, net.IP(sn.IPNet.IP))
		}
		out[name] = saved
	}
	return out
}

// restoreNetworks are the spec's networks with the addresses the container
// had when it was checkpointed, unless the restore ignores them.
func restoreNetworks(spec map[string]core.PerNetworkOptions, saved map[string]core.PerNetworkOptions, opts core.RestoreOptions) map[string]core.PerNetworkOptions {
	if len(saved) == 0 || (opts.IgnoreStaticIP && opts.IgnoreStaticMAC) {
		return nil
	}
	out := maps.Clone(spec)
	for name, cur := range out {
		s, ok := saved[name]
		if !ok {
			continue
		}
		if !opts.IgnoreStaticIP && len(cur.StaticIPs) == 0 {
			cur.StaticIPs = s.StaticIPs
		}
		if !opts.IgnoreStaticMAC && len(cur.StaticMAC) == 0 {
			cur.StaticMAC = s.StaticMAC
		}
		out[name] = cur
	}
	return out
}

// Restore starts a checkpointed container from its checkpoint, in place.
func (m *Manager) Restore(ctx context.Context, nameOrID string, opts core.RestoreOptions) (core.RestoreReport, error) {
	var report core.RestoreReport
	err := m.observedLocked(ctx, "restore", nameOrID, func(ctx context.Context, e *entry) error {
		var err error
		report, err = m.restoreLocked(ctx, e, opts)
		return err
	})
	return report, err
}

func (m *Manager) restoreLocked(ctx context.Context, e *entry, opts core.RestoreOptions) (core.RestoreReport, error) {
	rec := m.snapshot(e)
	report := core.RestoreReport{ID: rec.ID}
	if !rec.Checkpointed {
		return report, fmt.Errorf("container %s has no checkpoint to restore: %w", rec.Name, core.ErrContainerStateImproper)
	}
	if rec.State != core.StateExited && rec.State != core.StateStopped && rec.State != core.StateConfigured {
		return report, fmt.Errorf("container %s is %s; stop it before restoring its checkpoint: %w", rec.Name, rec.State, core.ErrContainerStateImproper)
	}
	dir := checkpointDir(rec)
	if !runtime.DumpComplete(dir) {
		return report, fmt.Errorf("container %s: the checkpoint in %s is incomplete: %w", rec.Name, dir, core.ErrContainerStateImproper)
	}
	m.cleanupLocked(ctx, e)
	rec = m.snapshot(e)
	if err := checkOnHost(&rec.Spec); err != nil {
		return report, err
	}
	if rec.PodJoin.InfraID != "" {
		if err := m.ensureInfraRunning(ctx, &rec); err != nil {
			return report, err
		}
	}
	if err := m.ensureDependenciesRunning(ctx, &rec); err != nil {
		return report, err
	}
	if _, err := m.prepare(ctx, &rec, nil); err != nil {
		return report, err
	}
	if err := m.update(ctx, e, func(r *record) {
		r.Rootfs, r.Mounted, r.Path, r.Args, r.CDIGeneration = rec.Rootfs, rec.Mounted, rec.Path, rec.Args, rec.CDIGeneration
	}); err != nil {
		return report, err
	}
	held, err := m.holdHostPorts(&rec)
	if err != nil {
		return report, err
	}
	defer network.ReleaseHostPorts(held)
	if err := m.mountPerRun(ctx, &rec); err != nil {
		return report, err
	}
	if err := restoreShm(&rec, dir); err != nil {
		unmountPerRun(rec.StaticDir)
		return report, err
	}
	if err := m.mountVolumes(ctx, &rec); err != nil {
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		return report, err
	}
	if err := mountOverlays(&rec); err != nil {
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		return report, err
	}
	if err := m.setupNetworksLocked(ctx, e, restoreNetworks(rec.Spec.Networks, rec.CheckpointNets, opts)); err != nil {
		m.teardownNetworkLocked(ctx, e)
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		return report, err
	}
	os.Remove(filepath.Join(dir, runtime.RestoreLog))
	criuConf, err := prepareRestoreSpec(&rec)
	if err != nil {
		m.teardownNetworkLocked(ctx, e)
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		return report, err
	}
	if criuConf != "" {
		// Read by CRIU during the restore only: a later dump of the
		// restored container must not take it as its cgroup root.
		defer os.Remove(criuConf)
	}
	if err := m.update(ctx, e, func(r *record) { r.Restoring = true }); err != nil {
		return report, err
	}
	start := time.Now()
	create := runtimeCreateOptions(&rec)
	create.RestoreDir, create.RuntimeOpts = dir, runtime.RestoreOptions(dir, opts.TCPEstablished, opts.FileLocks)
	create.Held = held
	created, err := m.rt.Create(ctx, create)
	report.RuntimeDuration = time.Since(start)
	if err != nil {
		m.rt.Delete(ctx, rec.ID, true)
		m.rt.Cleanup(rec.ID)
		m.teardownNetworkLocked(ctx, e)
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		m.update(ctx, e, func(r *record) { r.Restoring = false })
		msg := err.Error()
		var ce *runtime.CreateError
		if errors.As(err, &ce) {
			msg = ce.Message
		}
		if detail := runtime.CRIUErrors(filepath.Join(dir, runtime.RestoreLog)); detail != "" {
			msg += "; CRIU: " + detail
		}
		return report, fmt.Errorf("restore container %s: %s", rec.Name, msg)
	}
	unstageSubPaths(rec.StaticDir)
	if opts.PrintStats {
		if report.CRIUStatistics, err = runtime.ReadStats(filepath.Join(dir, runtime.StatsRestore)); err != nil {
			m.logger.Warn("read CRIU statistics", "container", rec.ID, "err", err)
		}
	}
	// The dump found the container frozen (checkpointLocked froze it);
	// where CRIU brings that state back, the restored container is thawed.
	if st, err := m.rt.State(ctx, rec.ID); err == nil && st.Status == "paused" {
		if err := m.rt.FreezeForDump(ctx, rec.ID, false); err != nil {
			m.logger.Warn("thaw the restored container", "container", rec.ID, "err", err)
		}
	}
	if err := m.finishRestore(ctx, e, created.PID, created.ConmonPID, opts.Keep); err != nil {
		return report, err
	}
	return report, nil
}

// prepareRestoreSpec adds to the bundle's spec what a restore needs beyond
// a start, and returns a file to remove once the restore is over:
//   - the container's CRIU configuration (runtime.CRIUConfigFile), named in
//     the spec (containers created before every spec named it get it now);
//     on the unified hierarchy, where runc does not tell CRIU the new
//     cgroup (on v1 runc names each controller's root itself), it puts the
//     processes into the container's own cgroup;
//   - for a network namespace the runtime creates (no path), the hook that
//     brings its loopback up (runtime.RestoreLoopbackHook).
func prepareRestoreSpec(rec *record) (string, error) {
	hook, err := runtime.RestoreLoopbackHook()
	if err != nil {
		return "", err
	}
	conf := filepath.Join(rec.Bundle, runtime.CRIUConfigFile)
	var c runtime.CRIUConfig
	if cgroups.Host().Unified() {
		c.CgroupRoot = rec.CgroupPath
	}
	if err := runtime.WriteCRIUConfig(conf, c); err != nil {
		return "", err
	}
	err = editBundleSpec(rec.Bundle, func(spec *specs.Spec) error {
		setCRIUConfigAnnotation(spec, rec.Bundle)
		if spec.Linux == nil {
			return nil
		}
		for _, ns := range spec.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace && ns.Path == "" {
				if spec.Hooks == nil {
					spec.Hooks = &specs.Hooks{}
				}
				spec.Hooks.CreateRuntime = append(spec.Hooks.CreateRuntime, hook)
			}
		}
		return nil
	})
	if err != nil {
		os.Remove(conf)
		return "", err
	}
	return conf, nil
}

// setCRIUConfigAnnotation names the container's CRIU configuration in its
// OCI spec, unless the client named a file of its own (outside the bundle)
// there.
func setCRIUConfigAnnotation(spec *specs.Spec, bundle string) {
	if v, set := spec.Annotations[runtime.CRIUConfigAnnotation]; set && filepath.Dir(v) != bundle {
		return
	}
	if spec.Annotations == nil {
		spec.Annotations = map[string]string{}
	}
	spec.Annotations[runtime.CRIUConfigAnnotation] = filepath.Join(bundle, runtime.CRIUConfigFile)
}

// finishRestore records a restored container as running and, unless keep,
// drops the checkpoint it came from.
func (m *Manager) finishRestore(ctx context.Context, e *entry, pid, conmonPID int, keep bool) error {
	rec := m.snapshot(e)
	dir := checkpointDir(rec)
	now := time.Now()
	if err := m.update(ctx, e, func(r *record) {
		r.Restoring = false
		r.State = core.StateRunning
		r.PID = pid
		r.ConmonPID = conmonPID
		r.PauseProcess = false
		r.NeedsCleanup = true
		r.StartedAt = now
		r.StoppedByUser = false
		r.Error = ""
		r.ExitCode = 0
		r.OOMKilled = false
		r.Restored = true
		r.RestoredAt = now
		r.RestoreLog = filepath.Join(dir, runtime.RestoreLog)
		r.Checkpointed = keep
		if !keep {
			r.CheckpointNets = nil
		}
	}); err != nil {
		return err
	}
	if !keep {
		os.RemoveAll(dir)
	}
	m.emit(ctx, core.EventRestore, m.snapshot(e), nil)
	m.handleExit(ctx, e)
	return nil
}

// reconcileCheckpointLocked settles a checkpoint or restore an engine crash
// interrupted; Open calls it before the general reconcile. A dump that
// finished leaves the container checkpointed (restorable), one that did not
// leaves it running (CRIU resumes it) or exited. A restore that conmon
// completed without the engine is adopted as running; one that failed
// leaves the checkpoint in place.
func (m *Manager) reconcileCheckpointLocked(ctx context.Context, e *entry) {
	rec := m.snapshot(e)
	if rec.Importing {
		// Killed before the imported checkpoint was in place: the
		// container is only half made.
		m.logger.Warn("remove a container whose import the engine did not finish", "container", rec.ID)
		if err := m.removeLocked(ctx, e, core.RemoveContainerOptions{Force: true, Volumes: true}); err != nil {
			m.logger.Warn("remove a half-imported container", "container", rec.ID, "err", err)
			return
		}
		m.dropVolumes(ctx, rec.ID, rec.ImportVolumes)
		return
	}
	if rec.Checkpointing {
		// The engine froze the container before the dump: one still
		// frozen (killed before the dump began, or after a dump that
		// leaves it running) is thawed, never left frozen.
		if st, err := m.rt.State(ctx, rec.ID); err == nil && st.Status == "paused" {
			if err := m.rt.Resume(ctx, rec.ID); err != nil {
				m.logger.Warn("thaw a container frozen for a checkpoint the engine did not finish", "container", rec.ID, "err", err)
			}
		}
		dir := checkpointDir(rec)
		done := runtime.DumpComplete(dir)
		now := time.Now()
		m.update(ctx, e, func(r *record) {
			r.Checkpointing = false
			if !done {
				// No checkpoint was taken: the container's policy
				// applies (a running container's flag was false).
				r.StoppedByUser = false
			}
			if done {
				r.Checkpointed = true
				r.CheckpointedAt = now
				r.CheckpointPath = dir
				r.CheckpointLog = filepath.Join(dir, runtime.DumpLog)
				r.CheckpointNets = checkpointNets(rec)
			}
		})
		if !done {
			os.RemoveAll(dir)
		}
		return
	}
	if !rec.Restoring {
		return
	}
	// Adopted only with its conmon: a conmon that died with the engine's
	// end of its sync pipe took the container's stdio with it.
	st, err := m.rt.State(ctx, rec.ID)
	conmonPID, _ := readConmonPID(rec.Bundle)
	if err == nil && (st.Status == "running" || st.Status == "paused") && runtime.ConmonAlive(conmonPID, rec.ID) {
		if err := m.finishRestore(ctx, e, st.Pid, conmonPID, true); err != nil {
			m.logger.Warn("adopt a restored container", "container", rec.ID, "err", err)
		}
		return
	}
	m.logger.Warn("a restore the engine did not see finish left no usable container; the checkpoint stays", "container", rec.ID)
	m.rt.Delete(ctx, rec.ID, true)
	if conmonPID > 0 {
		runtime.WaitConmonExit(conmonPID, rec.ID, time.Second)
	}
	m.rt.Cleanup(rec.ID)
	m.teardownNetworkLocked(ctx, e)
	m.unmountVolumes(ctx, &rec)
	m.update(ctx, e, func(r *record) { r.Restoring = false })
}

func readConmonPID(bundle string) (int, error) {
	data, err := os.ReadFile(filepath.Join(bundle, "conmon.pid"))
	if err != nil {
		return 0, err
	}
	var pid int
	_, err = fmt.Sscanf(string(data), "%d", &pid)
	return pid, err
}

// exportCheckpointLocked writes the container's checkpoint archive to
// opts.Export: CRIU's images, its configuration, its layer's changes and
// its volumes, unless told to leave them out.
func (m *Manager) exportCheckpointLocked(ctx context.Context, e *entry, opts core.CheckpointOptions) error {
	rec := m.snapshot(e)
	cfg := checkpointarchive.Config{
		ID: rec.ID, Name: rec.Name, Image: rec.Image, ImageID: rec.ImageID,
		Spec: rec.Spec, Networks: rec.CheckpointNets, CheckpointedAt: rec.CheckpointedAt,
	}
	for _, v := range rec.Volumes {
		cfg.Volumes = append(cfg.Volumes, checkpointarchive.Volume{
			Name: v.Name, Dest: v.Dest, Anonymous: v.Anonymous, Included: !opts.IgnoreVolumes && m.volumes != nil,
		})
	}
	contents := checkpointarchive.Contents{
		Config: cfg, CheckpointDir: checkpointDir(rec),
		Volume: func(i int, w io.Writer) error { return m.volumes.Export(ctx, rec.Volumes[i].Name, w) },
	}
	if !opts.IgnoreRootFS {
		contents.RootfsDiff = func(w io.Writer) error { return m.layerDiff(rec.ID, w) }
	}
	return checkpointarchive.Write(opts.Export, contents)
}
