// Command kubecheck validates Kubernetes manifests offline, without a cluster: it reads a
// multi-document YAML stream (for example `kubectl kustomize deploy/kubernetes`) and decodes
// every object strictly into its k8s.io/api type, so unknown or misspelt fields and wrong
// types fail. It then checks the references between the objects: Deployment and DaemonSet
// selectors match their pod templates, Services and NetworkPolicies select existing pods,
// named ports and claimed volumes exist, and every container has probes and resources.
//
// Usage: kubectl kustomize deploy/kubernetes | go run ./hack/kubecheck
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

func main() {
	problems, err := check(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubecheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "kubecheck:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Println("kubecheck: ok")
}

// podSpec is a workload's pod template with where it came from.
type podSpec struct {
	owner  string
	labels map[string]string
	spec   corev1.PodSpec
}

type manifests struct {
	pods     []podSpec
	services []corev1.Service
	policies []networkingv1.NetworkPolicy
	pvcs     map[string]bool
}

func check(r io.Reader) ([]string, error) {
	docs, err := splitDocuments(r)
	if err != nil {
		return nil, err
	}
	m := manifests{pvcs: map[string]bool{}}
	var problems []string
	for i, doc := range docs {
		if err := m.decode(doc); err != nil {
			problems = append(problems, fmt.Sprintf("document %d: %v", i+1, err))
		}
	}
	problems = append(problems, m.crossCheck()...)
	return problems, nil
}

func splitDocuments(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	flush := func() {
		if strings.TrimSpace(cur.String()) != "" {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " ") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	if len(docs) == 0 {
		return nil, errors.New("no documents on standard input")
	}
	return docs, nil
}

func (m *manifests) decode(doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	strict := func(v any) error {
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			return fmt.Errorf("%s %s: %w", meta.APIVersion, meta.Kind, err)
		}
		return nil
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 Namespace":
		return strict(&corev1.Namespace{})
	case "v1 ConfigMap":
		return strict(&corev1.ConfigMap{})
	case "v1 Secret":
		return strict(&corev1.Secret{})
	case "v1 ServiceAccount":
		return strict(&corev1.ServiceAccount{})
	case "v1 PersistentVolumeClaim":
		var o corev1.PersistentVolumeClaim
		if err := strict(&o); err != nil {
			return err
		}
		m.pvcs[o.Name] = true
	case "v1 Service":
		var o corev1.Service
		if err := strict(&o); err != nil {
			return err
		}
		m.services = append(m.services, o)
	case "apps/v1 Deployment":
		var o appsv1.Deployment
		if err := strict(&o); err != nil {
			return err
		}
		if err := selects(o.Spec.Selector.MatchLabels, o.Spec.Template.Labels); err != nil {
			return fmt.Errorf("Deployment %s: %w", o.Name, err)
		}
		m.pods = append(m.pods, podSpec{"Deployment " + o.Name, o.Spec.Template.Labels, o.Spec.Template.Spec})
	case "apps/v1 DaemonSet":
		var o appsv1.DaemonSet
		if err := strict(&o); err != nil {
			return err
		}
		if err := selects(o.Spec.Selector.MatchLabels, o.Spec.Template.Labels); err != nil {
			return fmt.Errorf("DaemonSet %s: %w", o.Name, err)
		}
		m.pods = append(m.pods, podSpec{"DaemonSet " + o.Name, o.Spec.Template.Labels, o.Spec.Template.Spec})
	case "networking.k8s.io/v1 NetworkPolicy":
		var o networkingv1.NetworkPolicy
		if err := strict(&o); err != nil {
			return err
		}
		m.policies = append(m.policies, o)
	default:
		return fmt.Errorf("unexpected kind %q %q (teach hack/kubecheck about it)", meta.APIVersion, meta.Kind)
	}
	return nil
}

func selects(selector, podLabels map[string]string) error {
	if len(selector) == 0 {
		return errors.New("empty selector")
	}
	if !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
		return fmt.Errorf("selector %v does not match the pod template labels %v", selector, podLabels)
	}
	return nil
}

func (m *manifests) matching(selector map[string]string) []podSpec {
	var out []podSpec
	for _, p := range m.pods {
		if labels.SelectorFromSet(selector).Matches(labels.Set(p.labels)) {
			out = append(out, p)
		}
	}
	return out
}

func (m *manifests) crossCheck() []string {
	var problems []string
	for _, p := range m.pods {
		problems = append(problems, checkPod(p, m.pvcs)...)
	}
	for _, s := range m.services {
		pods := m.matching(s.Spec.Selector)
		if len(pods) == 0 {
			problems = append(problems, fmt.Sprintf("Service %s selects no pod template", s.Name))
			continue
		}
		for _, port := range s.Spec.Ports {
			if port.TargetPort.Type == 1 && !hasPort(pods[0].spec, port.TargetPort.StrVal) {
				problems = append(problems, fmt.Sprintf("Service %s: target port %q is not a container port of %s", s.Name, port.TargetPort.StrVal, pods[0].owner))
			}
		}
	}
	for _, np := range m.policies {
		if len(m.matching(np.Spec.PodSelector.MatchLabels)) == 0 {
			problems = append(problems, fmt.Sprintf("NetworkPolicy %s selects no pod template", np.Name))
		}
		for _, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				if peer.PodSelector != nil && peer.NamespaceSelector == nil && len(m.matching(peer.PodSelector.MatchLabels)) == 0 {
					problems = append(problems, fmt.Sprintf("NetworkPolicy %s: ingress peer %v selects no pod template", np.Name, peer.PodSelector.MatchLabels))
				}
			}
		}
	}
	return problems
}

func checkPod(p podSpec, pvcs map[string]bool) []string {
	var problems []string
	volumes := map[string]bool{}
	for _, v := range p.spec.Volumes {
		volumes[v.Name] = true
		if v.PersistentVolumeClaim != nil && !pvcs[v.PersistentVolumeClaim.ClaimName] {
			problems = append(problems, fmt.Sprintf("%s: volume %s claims unknown PVC %s", p.owner, v.Name, v.PersistentVolumeClaim.ClaimName))
		}
	}
	for _, c := range p.spec.Containers {
		where := fmt.Sprintf("%s container %s", p.owner, c.Name)
		if c.Image == "" {
			problems = append(problems, where+": no image")
		}
		for _, vm := range c.VolumeMounts {
			if !volumes[vm.Name] {
				problems = append(problems, fmt.Sprintf("%s: mounts unknown volume %s", where, vm.Name))
			}
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			problems = append(problems, where+": needs a liveness and a readiness probe")
		}
		for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if probe != nil && probe.HTTPGet != nil && probe.HTTPGet.Port.Type == 1 && !hasPort(p.spec, probe.HTTPGet.Port.StrVal) {
				problems = append(problems, fmt.Sprintf("%s: probe port %q is not a container port", where, probe.HTTPGet.Port.StrVal))
			}
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			problems = append(problems, where+": needs memory requests and limits")
		}
	}
	return problems
}

func hasPort(spec corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		for _, port := range c.Ports {
			if port.Name == name {
				return true
			}
		}
	}
	return false
}
