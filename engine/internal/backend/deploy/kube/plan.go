package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// plan is everything a play creates, worked out and checked before
// anything is created.
type plan struct {
	secrets []secretPlan
	volumes []volumePlan
	pods    []*podPlan
	// network is the default kube network to create ("" when the request
	// names its own networks).
	network string
}

type secretPlan struct {
	name   string
	data   []byte
	labels map[string]string
}

// volumePlan is a named volume: a claim's, or one filled with the files
// of a ConfigMap or Secret.
type volumePlan struct {
	name   string
	labels map[string]string
	opts   map[string]string
	// files are written into the volume (ConfigMap and Secret volumes);
	// nil for a claim.
	files map[string][]byte
	claim bool
}

type podPlan struct {
	doc            *document
	name           string
	spec           core.PodSpec
	initContainers []core.ContainerSpec
	containers     []core.ContainerSpec
	// hostDirs are hostPath directories to create (DirectoryOrCreate).
	hostDirs []string
	logs     []string
}

// planner works out a plan from the parsed documents.
type planner struct {
	p          *Player
	opts       core.KubePlayOptions
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]map[string][]byte
	claims     map[string]bool
	services   []*document
	ipIndex    int
	images     map[string]string
}

func (p *Player) plan(ctx context.Context, docs []*document, opts core.KubePlayOptions) (*plan, error) {
	pl := &planner{p: p, opts: opts, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]map[string][]byte{},
		claims: map[string]bool{}, images: map[string]string{}}
	out := &plan{}
	seen := map[string]*document{}
	for _, d := range docs {
		key := d.Kind + "/" + d.Name
		if d.Kind == kindDeployment || d.Kind == kindDaemonSet || d.Kind == kindJob {
			key = kindPod + "/" + d.Name
		}
		if first, dup := seen[key]; dup {
			return nil, d.fail("metadata.name", fmt.Errorf("%q is also the name of document %d", d.Name, first.Index))
		}
		seen[key] = d
		switch d.Kind {
		case kindConfigMap:
			pl.configMaps[d.Name] = d.ConfigMap
		case kindSecret:
			data := map[string][]byte{}
			for k, v := range d.Secret.Data {
				data[k] = v
			}
			for k, v := range d.Secret.StringData {
				data[k] = []byte(v)
			}
			pl.secrets[d.Name] = data
			js, err := json.Marshal(data)
			if err != nil {
				return nil, d.fail("data", err)
			}
			out.secrets = append(out.secrets, secretPlan{name: d.Name, data: js, labels: d.Secret.Labels})
		case kindPVC:
			pl.claims[d.Name] = true
			out.volumes = append(out.volumes, volumePlan{name: d.Name, labels: d.PVC.Labels, opts: map[string]string{}, claim: true})
		case kindService:
			pl.services = append(pl.services, d)
		}
	}
	if len(opts.Networks) == 0 {
		out.network = DefaultNetwork
	}
	volumeFiles := map[string]bool{}
	for _, d := range docs {
		var templates []podTemplate
		switch d.Kind {
		case kindPod:
			templates = []podTemplate{{name: d.Name, meta: d.Pod.ObjectMeta, spec: d.Pod.Spec, path: "spec"}}
		case kindDeployment:
			replicas := int32(1)
			if d.Deployment.Spec.Replicas != nil {
				replicas = *d.Deployment.Spec.Replicas
			}
			if replicas < 0 || replicas > 100 {
				return nil, d.fail("spec.replicas", fmt.Errorf("%d is outside 0..100", replicas))
			}
			for i := int32(0); i < replicas; i++ {
				templates = append(templates, podTemplate{name: DeploymentPodName(d.Name, int(i)), meta: d.Deployment.Spec.Template.ObjectMeta,
					spec: d.Deployment.Spec.Template.Spec, path: "spec.template.spec", annotations: d.Deployment.Annotations})
			}
		case kindDaemonSet:
			templates = []podTemplate{{name: d.Name + "-pod", meta: d.DaemonSet.Spec.Template.ObjectMeta,
				spec: d.DaemonSet.Spec.Template.Spec, path: "spec.template.spec", annotations: d.DaemonSet.Annotations}}
		case kindJob:
			spec := d.Job.Spec.Template.Spec
			if spec.RestartPolicy == "" || spec.RestartPolicy == v1.RestartPolicyAlways {
				return nil, d.fail("spec.template.spec.restartPolicy", errors.New("a Job's pods restart OnFailure or Never"))
			}
			templates = []podTemplate{{name: d.Name + "-pod", meta: d.Job.Spec.Template.ObjectMeta,
				spec: spec, path: "spec.template.spec", annotations: d.Job.Annotations}}
		}
		for _, t := range templates {
			pp, err := pl.pod(ctx, d, t, out, volumeFiles)
			if err != nil {
				return nil, err
			}
			out.pods = append(out.pods, pp)
		}
	}
	if len(out.pods) == 0 && len(out.volumes) == 0 && len(out.secrets) == 0 {
		if len(pl.configMaps) > 0 {
			return nil, core.InvalidArgument("body", errors.New("ConfigMaps are not standalone objects: a pod must use them"))
		}
		return nil, core.InvalidArgument("body", errors.New("the YAML holds no pod, claim or secret to create"))
	}
	for _, svc := range pl.services {
		if err := pl.service(svc, out.pods); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// podSpec is the pod spec of a pod-making document.
func (d *document) podSpec() v1.PodSpec {
	switch d.Kind {
	case kindPod:
		return d.Pod.Spec
	case kindDeployment:
		return d.Deployment.Spec.Template.Spec
	case kindDaemonSet:
		return d.DaemonSet.Spec.Template.Spec
	case kindJob:
		return d.Job.Spec.Template.Spec
	}
	return v1.PodSpec{}
}

// podNames lists the pods the documents make, in order.
func podNames(docs []*document) []string {
	var names []string
	for _, d := range docs {
		switch d.Kind {
		case kindPod:
			names = append(names, d.Name)
		case kindDeployment:
			replicas := 1
			if r := d.Deployment.Spec.Replicas; r != nil {
				replicas = int(*r)
			}
			for i := 0; i < replicas && i <= 100; i++ {
				names = append(names, DeploymentPodName(d.Name, i))
			}
		case kindDaemonSet, kindJob:
			names = append(names, d.Name+"-pod")
		}
	}
	return names
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
