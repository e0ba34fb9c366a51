package kube

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-project/berth/engine/internal/core"
)

// service publishes a Service's node ports (and, with publishAllPorts,
// its ports) on the pods its selector matches.
func (pl *planner) service(d *document, pods []*podPlan) error {
	spec := d.Service.Spec
	switch spec.Type {
	case "", v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort:
	default:
		return d.fail("spec.type", fmt.Errorf("%q is not ClusterIP or NodePort", spec.Type))
	}
	var matched []*podPlan
	for _, pp := range pods {
		if len(spec.Selector) > 0 && selects(spec.Selector, pp.spec.Labels) {
			matched = append(matched, pp)
		}
	}
	for i, port := range spec.Ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto := strings.ToLower(string(port.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		if proto != "tcp" && proto != "udp" && proto != "sctp" {
			return d.fail(field+".protocol", fmt.Errorf("%q is not TCP, UDP or SCTP", port.Protocol))
		}
		if port.Port < 1 || port.Port > 65535 {
			return d.fail(field+".port", fmt.Errorf("%d is not a port", port.Port))
		}
		if port.NodePort != 0 && spec.Type != v1.ServiceTypeNodePort {
			return d.fail(field+".nodePort", errors.New("is for type NodePort"))
		}
		if port.NodePort < 0 || port.NodePort > 65535 {
			return d.fail(field+".nodePort", fmt.Errorf("%d is not a port", port.NodePort))
		}
		host := uint16(port.NodePort)
		if host == 0 && pl.opts.PublishAllPorts {
			host = uint16(port.Port)
		}
		if host == 0 {
			continue
		}
		target := int(port.Port)
		if port.TargetPort.Type == intstr.String || port.TargetPort.IntVal != 0 {
			n, err := targetPort(port.TargetPort, matched)
			if err != nil {
				return d.fail(field+".targetPort", err)
			}
			target = n
		}
		if len(matched) > 1 {
			return d.fail(field+".nodePort", fmt.Errorf("host port %d would be published by %d pods", host, len(matched)))
		}
		for _, pp := range matched {
			if pp.spec.NetNS.NSMode == core.NetNSHost {
				return d.fail(field, fmt.Errorf("pod %s uses the host's network", pp.name))
			}
			pp.spec.PortMappings = append(pp.spec.PortMappings, core.PortMapping{ContainerPort: uint16(target), HostPort: host, Protocol: proto})
		}
	}
	return nil
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func targetPort(tp intstr.IntOrString, pods []*podPlan) (int, error) {
	if tp.Type == intstr.Int {
		if tp.IntVal < 1 || tp.IntVal > 65535 {
			return 0, fmt.Errorf("%d is not a port", tp.IntVal)
		}
		return int(tp.IntVal), nil
	}
	for _, pp := range pods {
		for _, c := range pp.doc.podSpec().Containers {
			for _, p := range c.Ports {
				if p.Name == tp.StrVal {
					return int(p.ContainerPort), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no container port named %q in the selected pods", tp.StrVal)
}
