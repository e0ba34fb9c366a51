package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/berth-project/berth/engine/internal/core"
)

// Down stops and removes what the YAML describes; see core.KubePlayer.
func (p *Player) Down(ctx context.Context, data []byte, opts core.KubeDownOptions) (*core.KubePlayReport, error) {
	docs, err := parseDocuments(data)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down(ctx, docs, opts)
}

// down removes the documents' pods and secrets (and with Force their
// volumes). Pods that do not exist are skipped, as Podman's down skips
// them (its stop and removal ignore missing pods): a down of pods already
// gone answers a report with nothing removed.
func (p *Player) down(ctx context.Context, docs []*document, opts core.KubeDownOptions) (*core.KubePlayReport, error) {
	report := &core.KubePlayReport{
		StopReport: []*core.KubePodStopReport{},
		RmReport:   []*core.PodRmReport{},
	}
	names := podNames(docs)
	// Every pod is looked up first, then all are removed concurrently
	// (a forced removal stops the members, then the infra container).
	var ids []string
	for _, name := range names {
		pod, err := p.o.Pods.Inspect(ctx, name)
		if errors.Is(err, core.ErrNoSuchPod) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ids = append(ids, pod.ID)
	}
	zero := uint(0)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.o.Pods.Remove(ctx, id, core.RemovePodOptions{Force: true, Timeout: &zero}); err != nil && !errors.Is(err, core.ErrNoSuchPod) {
				errs[i] = fmt.Errorf("removing pod %s: %w", id, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, id := range ids {
		report.StopReport = append(report.StopReport, &core.KubePodStopReport{Errs: []string{}, ID: id})
		report.RmReport = append(report.RmReport, &core.PodRmReport{ID: id})
	}
	for _, d := range docs {
		if d.Kind != kindSecret {
			continue
		}
		s, err := p.o.Secrets.Inspect(ctx, d.Name, false)
		if errors.Is(err, core.ErrNoSuchSecret) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := p.o.Secrets.Remove(ctx, s.ID); err != nil && !errors.Is(err, core.ErrNoSuchSecret) {
			return nil, fmt.Errorf("removing secret %s: %w", d.Name, err)
		}
		report.SecretRmReport = append(report.SecretRmReport, &core.KubeSecretRmReport{ID: s.ID})
	}
	if opts.Force {
		for _, name := range volumeNames(docs) {
			if err := p.o.Volumes.Remove(ctx, name, true); err != nil {
				if errors.Is(err, core.ErrNoSuchVolume) {
					continue
				}
				return nil, fmt.Errorf("removing volume %s: %w", name, err)
			}
			report.VolumeRmReport = append(report.VolumeRmReport, &core.KubeVolumeRmReport{ID: name})
		}
	}
	return report, nil
}

// volumeNames lists the volumes the documents stand for: claims, and
// ConfigMaps and Secrets that pods mount.
func volumeNames(docs []*document) []string {
	mounted := map[string]bool{}
	for _, d := range docs {
		for _, v := range d.podSpec().Volumes {
			switch {
			case v.ConfigMap != nil:
				mounted[v.ConfigMap.Name] = true
			case v.Secret != nil:
				mounted[v.Secret.SecretName] = true
			}
		}
	}
	var names []string
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d.Name] {
			continue
		}
		if d.Kind == kindPVC || ((d.Kind == kindConfigMap || d.Kind == kindSecret) && mounted[d.Name]) {
			seen[d.Name] = true
			names = append(names, d.Name)
		}
	}
	return names
}
