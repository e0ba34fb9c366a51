package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// specsResources collects a container's cgroup limits.
type specsResources struct {
	cpuPeriod      *uint64
	cpuQuota       *int64
	memLimit       *int64
	memReservation *int64
}

func (r *specsResources) spec() *specs.LinuxResources {
	if r.cpuPeriod == nil && r.memLimit == nil && r.memReservation == nil {
		return nil
	}
	out := &specs.LinuxResources{}
	if r.cpuPeriod != nil {
		out.CPU = &specs.LinuxCPU{Period: r.cpuPeriod, Quota: r.cpuQuota}
	}
	if r.memLimit != nil || r.memReservation != nil {
		out.Memory = &specs.LinuxMemory{Limit: r.memLimit, Reservation: r.memReservation}
	}
	return out
}

func mountSpec(dest, typ, source string, options []string) specs.Mount {
	return specs.Mount{Destination: dest, Type: typ, Source: source, Options: options}
}

// image makes sure a container's image is local (building it from the
// archive's Containerfile or pulling it per the pull policy) and returns
// the reference to create the container from.
func (pl *planner) image(ctx context.Context, d *document, field string, c v1.Container) (string, error) {
	ref := c.Image
	if ref == "" {
		return "", d.fail(field+".image", errors.New("missing"))
	}
	key := ref + "\x00" + string(c.ImagePullPolicy)
	if got, ok := pl.images[key]; ok {
		return got, nil
	}
	p := pl.p
	_, lookupErr := p.o.Images.Lookup(ctx, ref)
	local := lookupErr == nil
	if lookupErr != nil && !errors.Is(lookupErr, core.ErrNoSuchImage) {
		return "", d.fail(field+".image", lookupErr)
	}
	if dir := pl.buildDir(ref); dir != "" && pl.opts.Build != nil && *pl.opts.Build || (dir != "" && !local && pl.opts.Build == nil) {
		if p.o.Builder == nil {
			return "", core.InvalidArgument("build", errors.New("no builder is configured"))
		}
		if _, err := p.o.Builder.BuildDir(ctx, dir, core.BuildOptions{Tags: []string{ref}, Layers: true, PullPolicy: core.PullMissing, Format: "oci"}); err != nil {
			return "", d.fail(field+".image", fmt.Errorf("building %s from %s: %w", ref, filepath.Base(dir), err))
		}
		pl.images[key] = ref
		return ref, nil
	}
	policy := core.PullMissing
	switch c.ImagePullPolicy {
	case "", v1.PullIfNotPresent:
	case v1.PullAlways:
		policy = core.PullAlways
	case v1.PullNever:
		policy = core.PullNever
	default:
		return "", d.fail(field+".imagePullPolicy", fmt.Errorf("%q is not Always, IfNotPresent or Never", c.ImagePullPolicy))
	}
	switch {
	case local && policy != core.PullAlways:
	case policy == core.PullNever:
		return "", d.fail(field+".image", fmt.Errorf("%s: %w (imagePullPolicy Never)", ref, core.ErrNoSuchImage))
	default:
		if p.o.Transfer == nil {
			return "", d.fail(field+".image", fmt.Errorf("%s: %w", ref, core.ErrNoSuchImage))
		}
		if _, err := p.o.Transfer.Pull(ctx, core.PullOptions{Reference: ref, Policy: policy, TLSVerify: pl.opts.TLSVerify, Auth: pl.opts.Auth}); err != nil {
			return "", d.fail(field+".image", fmt.Errorf("pulling %s: %w", ref, err))
		}
	}
	pl.images[key] = ref
	return ref, nil
}

// buildDir is the directory of the archive holding a Containerfile (or
// Dockerfile) for the image: the directory named after the image's last
// path component without tag or digest.
func (pl *planner) buildDir(ref string) string {
	if pl.opts.ContextDir == "" || (pl.opts.Build != nil && !*pl.opts.Build) {
		return ""
	}
	name := ref
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	name, _, _ = strings.Cut(name, "@")
	name, _, _ = strings.Cut(name, ":")
	if !validFileName(name) {
		return ""
	}
	dir := filepath.Join(pl.opts.ContextDir, name)
	for _, f := range []string{"Containerfile", "Dockerfile"} {
		if fi, err := os.Lstat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
			return dir
		}
	}
	return ""
}

// playRun creates a plan and remembers what it created for a rollback.
type playRun struct {
	p    *Player
	plan *plan
	opts core.KubePlayOptions

	// mu guards createdPods: pods are created concurrently.
	mu             sync.Mutex
	createdPods    []string
	createdVolumes []string
	createdSecrets []string
}

func (r *playRun) create(ctx context.Context) (*core.KubePlayReport, error) {
	o := r.p.o
	report := &core.KubePlayReport{}
	if r.plan.network != "" && len(r.plan.pods) > 0 && o.Networks != nil {
		if _, err := o.Networks.Create(ctx, core.Network{Name: r.plan.network, Driver: "bridge", DNSEnabled: true}, true); err != nil {
			return nil, fmt.Errorf("creating network %s: %w", r.plan.network, err)
		}
	}
	for _, s := range r.plan.secrets {
		id, err := o.Secrets.Create(ctx, core.SecretCreateOptions{Name: s.name, Driver: "file", Labels: s.labels, Replace: true}, s.data)
		if err != nil {
			return nil, fmt.Errorf("creating secret %s: %w", s.name, err)
		}
		r.createdSecrets = append(r.createdSecrets, s.name)
		report.Secrets = append(report.Secrets, core.KubePlaySecret{CreateReport: &core.KubeSecretCreateReport{ID: id}})
	}
	for _, v := range r.plan.volumes {
		vol, err := o.Volumes.Inspect(ctx, v.name)
		// An existing volume is reused (as Podman 5 does for claims and
		// ConfigMaps); only volumes this play created go on a rollback.
		switch {
		case err == nil:
		case errors.Is(err, core.ErrNoSuchVolume):
			vol, err = o.Volumes.Create(ctx, core.VolumeCreateOptions{Name: v.name, Driver: "local", Labels: v.labels, Options: v.opts})
			if err != nil {
				return nil, fmt.Errorf("creating volume %s: %w", v.name, err)
			}
			r.createdVolumes = append(r.createdVolumes, v.name)
		default:
			return nil, err
		}
		if v.claim {
			report.Volumes = append(report.Volumes, core.KubePlayVolume{Name: v.name})
		}
		for _, name := range sortedKeys(v.files) {
			if err := os.WriteFile(filepath.Join(vol.Mountpoint, name), v.files[name], 0o644); err != nil {
				return nil, fmt.Errorf("filling volume %s: %w", v.name, err)
			}
		}
	}
	// Pods are independent of each other: they are created and started
	// concurrently (the runtime and network setup of one overlap the
	// others'), and reported in the YAML's order.
	report.Pods = make([]core.KubePlayPod, len(r.plan.pods))
	errs := make([]error, len(r.plan.pods))
	start := r.opts.Start == nil || *r.opts.Start
	var wg sync.WaitGroup
	for i, pp := range r.plan.pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod, err := r.createPod(ctx, pp)
			if err != nil {
				errs[i] = fmt.Errorf("pod %s: %w", pp.name, err)
				return
			}
			if start {
				r.startPod(ctx, pp, pod)
			}
			report.Pods[i] = *pod
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return report, nil
}

func (r *playRun) createPod(ctx context.Context, pp *podPlan) (*core.KubePlayPod, error) {
	o := r.p.o
	for _, dir := range pp.hostDirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("hostPath %s: %w", dir, err)
		}
	}
	id, err := o.Pods.Create(ctx, pp.spec)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.createdPods = append(r.createdPods, id)
	r.mu.Unlock()
	out := &core.KubePlayPod{ID: id, Containers: []string{}, InitContainers: []string{}, Logs: append([]string{}, pp.logs...)}
	create := func(cs core.ContainerSpec) (string, error) {
		cs.Pod = id
		cid, warnings, err := o.Containers.Create(ctx, cs)
		if err != nil {
			return "", fmt.Errorf("container %s: %w", cs.Name, err)
		}
		for _, w := range warnings {
			out.Logs = append(out.Logs, w+"\n")
		}
		return cid, nil
	}
	for _, cs := range pp.initContainers {
		cid, err := create(cs)
		if err != nil {
			return nil, err
		}
		out.InitContainers = append(out.InitContainers, cid)
	}
	for _, cs := range pp.containers {
		cid, err := create(cs)
		if err != nil {
			return nil, err
		}
		out.Containers = append(out.Containers, cid)
	}
	return out, nil
}

// startPod starts the pod: the engine runs its init containers one after
// the other, each to completion, before the other members (and removes the
// "once" ones). Failures are the pod's ContainerErrors.
func (r *playRun) startPod(ctx context.Context, pp *podPlan, out *core.KubePlayPod) {
	rep, err := r.p.o.Pods.Start(ctx, out.ID)
	if err != nil && !errors.Is(err, core.ErrNotModified) {
		out.ContainerErrors = append(out.ContainerErrors, fmt.Sprintf("starting pod %s: %v", pp.name, err))
		return
	}
	if rep != nil {
		out.ContainerErrors = append(out.ContainerErrors, rep.Errs...)
	}
}

// wait waits for every regular container to exit and returns the highest
// exit code.
func (r *playRun) wait(ctx context.Context) (int32, error) {
	var worst int32
	for _, pp := range r.plan.pods {
		for _, cs := range pp.containers {
			code, err := r.p.o.Containers.Wait(ctx, cs.Name, nil)
			if err != nil {
				return 0, fmt.Errorf("waiting for %s: %w", cs.Name, err)
			}
			if code > worst {
				worst = code
			}
		}
	}
	return worst, nil
}

// rollback removes what the run created, newest first.
func (r *playRun) rollback(ctx context.Context) error {
	o := r.p.o
	var errs []error
	zero := uint(0)
	for i := len(r.createdPods) - 1; i >= 0; i-- {
		if _, err := o.Pods.Remove(ctx, r.createdPods[i], core.RemovePodOptions{Force: true, Timeout: &zero}); err != nil && !errors.Is(err, core.ErrNoSuchPod) {
			errs = append(errs, err)
		}
	}
	for i := len(r.createdVolumes) - 1; i >= 0; i-- {
		if err := o.Volumes.Remove(ctx, r.createdVolumes[i], true); err != nil && !errors.Is(err, core.ErrNoSuchVolume) {
			errs = append(errs, err)
		}
	}
	for i := len(r.createdSecrets) - 1; i >= 0; i-- {
		if err := o.Secrets.Remove(ctx, r.createdSecrets[i]); err != nil && !errors.Is(err, core.ErrNoSuchSecret) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
