package quadletactivate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// run is one activation: the unit asked for and the installed units it
// references (and, for a pod, its member containers), each recorded under
// its own name. A failure rolls back every unit this run activated.
type run struct {
	m   *Manager
	ctx context.Context
	// owner is the quadlet the run was asked to activate.
	owner    string
	recs     map[string]state.QuadletActivation
	visiting map[string]bool
	started  []string
}

// object resolves a reference to another quadlet to the name of the
// object it creates; the quadlet must be installed.
func (r *run) object(u *unit, e quadlets.Entry, ref string) (string, error) {
	ru, err := readUnit(r.m.o.Store, ref)
	if errors.Is(err, core.ErrNoSuchQuadlet) {
		return "", u.errAt(e, fmt.Errorf("references %s, which is not installed", ref))
	}
	if err != nil {
		return "", err
	}
	return objectName(ru), nil
}

// activate activates quadlet name after the quadlets it references;
// an active one, or one this run is activating, is left as it is.
func (r *run) activate(ctx context.Context, name string, ownsUnit bool) error {
	if _, active := r.recs[name]; active || r.visiting[name] {
		return nil
	}
	r.visiting[name] = true
	u, err := readUnit(r.m.o.Store, name)
	if err != nil {
		return err
	}
	p, err := translate(u, r)
	if err != nil {
		return err
	}
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	// The record comes first: a kill -9 from here on is settled at start
	// by tearing down this unit and the dependencies it activated.
	rec := state.QuadletActivation{Name: name, Status: statusActivating, OwnsUnit: ownsUnit}
	if name != r.owner {
		rec.ActivatedBy = r.owner
	}
	if err := r.m.o.Records.BeginQuadletActivation(r.ctx, rec); err != nil {
		return err
	}
	r.started = append(r.started, name)
	r.recs[name] = state.QuadletActivation{Name: name}
	for _, dep := range p.refs {
		if err := r.activate(ctx, dep, false); err != nil {
			return fmt.Errorf("activating %s, which %s references: %w", dep, name, err)
		}
	}
	if err := r.create(ctx, u, p); err != nil {
		return err
	}
	if err := r.m.o.Records.SetQuadletStatus(r.ctx, name, statusActive); err != nil {
		return err
	}
	if u.kind == "Pod" {
		return r.activateMembers(ctx, name)
	}
	return nil
}

// activateMembers activates the installed containers whose Pod= names pod.
func (r *run) activateMembers(ctx context.Context, pod string) error {
	list, err := r.m.o.Store.ListStatus(nil, nil)
	if err != nil {
		return err
	}
	for _, q := range list {
		if q.Pod == pod {
			if err := r.activate(ctx, q.Name, false); err != nil {
				return fmt.Errorf("activating %s, a member of %s: %w", q.Name, pod, err)
			}
		}
	}
	return nil
}

// record notes an object of quadlet name before it is created, so a crash
// between the two leaves a record that teardown tolerates.
func (r *run) record(name, kind, object string) error {
	return r.m.o.Records.AddQuadletObject(r.ctx, name, state.QuadletObject{Kind: kind, Object: object})
}

// create makes the objects of one unit.
func (r *run) create(ctx context.Context, u *unit, p *plan) error {
	o := r.m.o
	switch {
	case p.container != nil:
		if err := r.ensureImage(ctx, u.name, p.container.Image, p.pullPolicy); err != nil {
			return err
		}
		if err := r.record(u.name, objContainer, p.container.Name); err != nil {
			return err
		}
		if _, _, err := o.Containers.Create(ctx, *p.container); err != nil {
			return fmt.Errorf("creating container %s: %w", p.container.Name, err)
		}
		if err := o.Containers.Start(ctx, p.container.Name); err != nil && !errors.Is(err, core.ErrNotModified) {
			return fmt.Errorf("starting container %s: %w", p.container.Name, err)
		}
	case p.network != nil:
		if err := r.record(u.name, objNetwork, p.network.Name); err != nil {
			return err
		}
		if _, err := o.Networks.Create(ctx, *p.network, false); err != nil {
			return fmt.Errorf("creating network %s: %w", p.network.Name, err)
		}
	case p.volume != nil:
		if err := r.record(u.name, objVolume, p.volume.Name); err != nil {
			return err
		}
		if _, err := o.Volumes.Create(ctx, *p.volume); err != nil {
			return fmt.Errorf("creating volume %s: %w", p.volume.Name, err)
		}
	case p.pod != nil:
		if err := r.record(u.name, objPod, p.pod.Name); err != nil {
			return err
		}
		if _, err := o.Pods.Create(ctx, *p.pod); err != nil {
			return fmt.Errorf("creating pod %s: %w", p.pod.Name, err)
		}
		if _, err := o.Pods.Start(ctx, p.pod.Name); err != nil && !errors.Is(err, core.ErrNotModified) {
			return fmt.Errorf("starting pod %s: %w", p.pod.Name, err)
		}
	case p.image != nil:
		return r.pullImage(ctx, u.name, p.image)
	case p.build != nil:
		if err := r.record(u.name, objImage, p.build.opts.Tags[0]); err != nil {
			return err
		}
		if _, err := o.Builder.BuildDir(ctx, p.build.dir, p.build.opts); err != nil {
			return fmt.Errorf("building %s: %w", p.build.opts.Tags[0], err)
		}
	case p.kube != nil:
		return r.playKube(ctx, u, p.kube)
	}
	return nil
}

// playKube activates a .kube unit: the YAML is recorded (its teardown is
// kube down of it), then played with the unit's directory as context.
func (r *run) playKube(ctx context.Context, u *unit, k *kubePlan) error {
	o := r.m.o
	if o.Kube == nil {
		return core.InvalidArgument("quadlet", fmt.Errorf("%s: this engine cannot play kube YAML", u.name))
	}
	yaml, err := os.ReadFile(k.yamlFile)
	if err != nil {
		return core.InvalidArgument("quadlet", fmt.Errorf("%s: reading Yaml=%s: %w", u.name, k.yamlFile, err))
	}
	kind := objKube
	if k.downForce {
		kind = objKubeForce
	}
	if err := r.record(u.name, kind, string(yaml)); err != nil {
		return err
	}
	report, err := o.Kube.Play(ctx, yaml, k.opts)
	if err != nil {
		return fmt.Errorf("playing %s: %w", k.yamlFile, err)
	}
	for _, pod := range report.Pods {
		if err := r.record(u.name, objKubePod, pod.ID); err != nil {
			return err
		}
	}
	return nil
}

// ensureImage makes image present for a container, as podman run pulls
// it; an image it pulls is recorded (and removed at teardown if unused).
func (r *run) ensureImage(ctx context.Context, quadlet, image string, policy core.PullPolicy) error {
	_, err := r.m.o.Images.Lookup(ctx, image)
	present := err == nil
	if err != nil && !errors.Is(err, core.ErrNoSuchImage) {
		return err
	}
	if present && policy != core.PullAlways && policy != core.PullNewer {
		return nil
	}
	if !present && policy == core.PullNever {
		return fmt.Errorf("image %s is not present and Pull=never: %w", image, core.ErrNoSuchImage)
	}
	if !present {
		if err := r.record(quadlet, objImage, image); err != nil {
			return err
		}
	}
	if _, err := r.m.o.Transfer.Pull(ctx, core.PullOptions{Reference: image, Policy: policy}); err != nil {
		return fmt.Errorf("pulling %s: %w", image, err)
	}
	return nil
}

// pullImage activates a .image unit: the pull, then the ImageTag name.
func (r *run) pullImage(ctx context.Context, quadlet string, p *imagePlan) error {
	o := r.m.o
	_, err := o.Images.Lookup(ctx, p.pull.Reference)
	present := err == nil
	if err != nil && !errors.Is(err, core.ErrNoSuchImage) {
		return err
	}
	if !present {
		if err := r.record(quadlet, objImage, p.pull.Reference); err != nil {
			return err
		}
	}
	if !present || p.pull.Policy == core.PullAlways || p.pull.Policy == core.PullNewer {
		if !present && p.pull.Policy == core.PullNever {
			return fmt.Errorf("image %s is not present and Policy=never: %w", p.pull.Reference, core.ErrNoSuchImage)
		}
		if _, err := o.Transfer.Pull(ctx, p.pull); err != nil {
			return fmt.Errorf("pulling %s: %w", p.pull.Reference, err)
		}
	}
	if p.tag == "" {
		return nil
	}
	if _, err := o.Images.Lookup(ctx, p.tag); err == nil {
		return nil
	}
	if err := r.record(quadlet, objImage, p.tag); err != nil {
		return err
	}
	repo, tag := splitTag(p.tag)
	if err := o.Images.Tag(ctx, p.pull.Reference, repo, tag); err != nil {
		return fmt.Errorf("tagging %s as %s: %w", p.pull.Reference, p.tag, err)
	}
	return nil
}

// splitTag splits repo[:tag] (a port's colon before the last slash is
// part of the repository).
func splitTag(ref string) (string, string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, "latest"
	}
	return ref[:i], ref[i+1:]
}

// rollback tears down every unit this run activated, newest first.
func (r *run) rollback() {
	recs, err := r.m.o.Records.QuadletActivations(r.ctx)
	if err != nil {
		r.m.o.Logger.Error("rolling back a quadlet activation", "error", err)
		return
	}
	var mine []state.QuadletActivation
	for _, rec := range recs {
		if slices.Contains(r.started, rec.Name) {
			mine = append(mine, rec)
		}
	}
	for _, rec := range teardownOrder(mine) {
		if err := r.m.teardown(r.ctx, rec); err != nil {
			r.m.o.Logger.Error("rolling back a quadlet activation", "quadlet", rec.Name, "error", err)
		}
	}
}
