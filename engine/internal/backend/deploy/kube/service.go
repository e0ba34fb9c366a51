package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// Labels linking a play's containers to its service container. They are
// the only record of the link, so it survives an engine restart.
const (
	// ServiceLabel is set on every container of a play with a service
	// container: the service container's name.
	ServiceLabel = "io.berth.kube.service"
	// ServicePodsLabel is set on the service container: the names of the
	// play's pods, comma-separated.
	ServicePodsLabel = "io.berth.kube.service-pods"
)

// ServiceContainerName is the name Podman gives a play's service
// container: the first 12 hex digits of the YAML's SHA-256 and "-service",
// so that the same YAML finds it again.
func ServiceContainerName(yaml []byte) string {
	sum := sha256.Sum256(yaml)
	return hex.EncodeToString(sum[:])[:12] + "-service"
}

// checkService refuses a service container the play cannot have.
func (p *Player) checkService(opts core.KubePlayOptions, pl *plan) error {
	if !opts.ServiceContainer {
		return nil
	}
	switch {
	case p.o.InfraImage == nil:
		return core.InvalidArgument("serviceContainer", errors.New("this engine has no infra image to run service containers"))
	case opts.Start != nil && !*opts.Start:
		return core.InvalidArgument("serviceContainer", errors.New("a service container needs the pods started (start=false)"))
	case len(pl.pods) == 0:
		return core.InvalidArgument("serviceContainer", errors.New("the YAML makes no pod for a service container to serve"))
	}
	return nil
}

// startService creates and starts the play's service container before its
// pods, as Podman does: a container of the infra image (catatonit in pause
// mode) without network, named after the YAML, listing the play's pods;
// the plan's containers are labelled with its name so that ServiceHook
// stops it when they have all exited and removes it with them. A service
// container of the same name is replaced with opts.Replace, or when its
// pods are gone; otherwise the name is in use (409).
func (p *Player) startService(ctx context.Context, yaml []byte, pl *plan, opts core.KubePlayOptions) (string, error) {
	name := ServiceContainerName(yaml)
	if old, err := p.o.Containers.Lookup(ctx, name); err == nil {
		if !opts.Replace && p.servicePodsActive(ctx, old) {
			return "", fmt.Errorf("service container %s of this YAML exists (replace it with replace=true): %w", name, core.ErrNameInUse)
		}
		zero := uint(0)
		if err := p.o.Containers.Remove(ctx, old.ID, core.RemoveContainerOptions{Force: true, Timeout: &zero}); err != nil && !errors.Is(err, core.ErrNoSuchContainer) {
			return "", fmt.Errorf("replacing service container %s: %w", name, err)
		}
	} else if !errors.Is(err, core.ErrNoSuchContainer) {
		return "", err
	}
	image, err := p.o.InfraImage(ctx)
	if err != nil {
		return "", fmt.Errorf("image for the service container: %w", err)
	}
	pods := make([]string, 0, len(pl.pods))
	for _, pp := range pl.pods {
		pods = append(pods, pp.name)
		// Init containers stay unlabelled: their exit before the other
		// members start must not stop the service.
		for i := range pp.containers {
			addLabel(&pp.containers[i], ServiceLabel, name)
		}
	}
	id, _, err := p.o.Containers.Create(ctx, core.ContainerSpec{
		Name:          name,
		Image:         image,
		NetNS:         core.Namespace{NSMode: core.NetNSNone},
		Labels:        map[string]string{ServicePodsLabel: strings.Join(pods, ",")},
		RestartPolicy: core.RestartPolicyNo,
	})
	if err != nil {
		return "", fmt.Errorf("creating service container %s: %w", name, err)
	}
	if err := p.o.Containers.Start(ctx, id); err != nil {
		p.removeService(context.WithoutCancel(ctx), id)
		return "", fmt.Errorf("starting service container %s: %w", name, err)
	}
	return id, nil
}

func addLabel(cs *core.ContainerSpec, key, value string) {
	labels := make(map[string]string, len(cs.Labels)+1)
	for k, v := range cs.Labels {
		labels[k] = v
	}
	labels[key] = value
	cs.Labels = labels
}

// removeService removes a service container (a failed or finished play).
func (p *Player) removeService(ctx context.Context, id string) {
	zero := uint(0)
	if err := p.o.Containers.Remove(ctx, id, core.RemoveContainerOptions{Force: true, Timeout: &zero}); err != nil && !errors.Is(err, core.ErrNoSuchContainer) {
		p.o.Logger.Warn("kube play: removing the service container", "container", id, "error", err)
	}
}

// ServiceHook keeps service containers in step with their pods, as
// Podman's do; register it with Containers.Subscribe. A member's start
// starts the service container again where it had stopped; once no member
// of its pods runs, it is stopped; once its pods are gone (removed, or
// left with their infra container only while they are removed), it is
// removed.
func (p *Player) ServiceHook(ctx context.Context, ev core.ContainerEvent) {
	name := ev.Labels[ServiceLabel]
	if name == "" {
		return
	}
	switch ev.Type {
	case core.EventStart, core.EventRestart, core.EventDied, core.EventRemove:
	default:
		return
	}
	svc, err := p.o.Containers.Lookup(ctx, name)
	if err != nil || svc.Spec.Labels[ServicePodsLabel] == "" {
		return
	}
	var opErr error
	switch {
	case ev.Type == core.EventStart || ev.Type == core.EventRestart:
		if svc.State != core.StateRunning {
			opErr = p.o.Containers.Start(ctx, svc.ID)
		}
	case p.servicePodsGone(ctx, svc):
		zero := uint(0)
		opErr = p.o.Containers.Remove(ctx, svc.ID, core.RemoveContainerOptions{Force: true, Timeout: &zero})
	case svc.State == core.StateRunning && !p.servicePodsActive(ctx, svc):
		opErr = p.o.Containers.Stop(ctx, svc.ID, nil)
	}
	if opErr != nil && !errors.Is(opErr, core.ErrNotModified) && !errors.Is(opErr, core.ErrNoSuchContainer) {
		p.o.Logger.Warn("kube service container", "container", svc.Name, "event", string(ev.Type), "error", opErr)
	}
}

// serviceMembers returns the states of the non-infra containers of each
// pod the service container lists that still exists.
func (p *Player) serviceMembers(ctx context.Context, svc *core.Container) [][]string {
	var out [][]string
	for _, name := range strings.Split(svc.Spec.Labels[ServicePodsLabel], ",") {
		pod, err := p.o.Pods.Inspect(ctx, name)
		if err != nil {
			continue
		}
		var states []string
		for _, c := range pod.Containers {
			if c.ID != pod.InfraContainerID {
				states = append(states, c.State)
			}
		}
		if len(states) > 0 {
			out = append(out, states)
		}
	}
	return out
}

// servicePodsGone reports whether none of the service's pods has a member
// left.
func (p *Player) servicePodsGone(ctx context.Context, svc *core.Container) bool {
	return len(p.serviceMembers(ctx, svc)) == 0
}

// servicePodsActive reports whether a member of the service's pods runs
// (or is paused).
func (p *Player) servicePodsActive(ctx context.Context, svc *core.Container) bool {
	for _, states := range p.serviceMembers(ctx, svc) {
		for _, s := range states {
			if s == core.StateRunning.String() || s == core.StatePaused.String() {
				return true
			}
		}
	}
	return false
}
