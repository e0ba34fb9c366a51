package kube

import (
	"fmt"
	"sort"
	"strings"
)

// allow is the shape of the Kubernetes fields the engine honours: every key
// of a JSON object must be in it; a nil subtree accepts any content (maps
// such as labels, string lists). Lists are checked element by element.
type allow map[string]allow

// anyContent marks a member whose content is free (labels, command lines).
var anyContent allow

// falseOnly marks a boolean member honoured only as false, which is what the
// engine does anyway (no service account token, no service links); Podman's
// kube generate writes both as false.
var falseOnly = allow{"=false": nil}

// unsupported walks a decoded JSON value and names the first member that
// allow does not list, as a path (spec.containers[0].lifecycle).
func unsupported(v any, shape allow, path string) string {
	if shape == nil {
		return ""
	}
	if _, ok := shape["=false"]; ok && len(shape) == 1 {
		if b, isBool := v.(bool); isBool && !b {
			return ""
		}
		return path
	}
	switch val := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := shape[k]
			p := k
			if path != "" {
				p = path + "." + k
			}
			if !ok {
				return p
			}
			if bad := unsupported(val[k], sub, p); bad != "" {
				return bad
			}
		}
	case []any:
		for i, e := range val {
			if bad := unsupported(e, shape, fmt.Sprintf("%s[%d]", path, i)); bad != "" {
				return bad
			}
		}
	}
	return ""
}

func leaves(names ...string) allow {
	a := allow{}
	for _, n := range names {
		a[n] = anyContent
	}
	return a
}

func with(base allow, more allow) allow {
	out := allow{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

var (
	metaShape  = leaves("name", "namespace", "labels", "annotations", "creationTimestamp")
	probeShape = with(leaves("initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold"), allow{
		"exec":      leaves("command"),
		"httpGet":   leaves("path", "port", "host", "scheme"),
		"tcpSocket": leaves("port", "host"),
	})
	containerShape = with(leaves("name", "image", "command", "args", "workingDir", "imagePullPolicy", "stdin", "tty"), allow{
		"ports": leaves("name", "containerPort", "hostPort", "hostIP", "protocol"),
		"env": with(leaves("name", "value"), allow{
			"valueFrom": allow{
				"configMapKeyRef": leaves("name", "key", "optional"),
				"secretKeyRef":    leaves("name", "key", "optional"),
				"fieldRef":        leaves("fieldPath", "apiVersion"),
			},
		}),
		"envFrom": allow{
			"prefix":       anyContent,
			"configMapRef": leaves("name", "optional"),
			"secretRef":    leaves("name", "optional"),
		},
		// Resource names are checked by resources(): cpu, memory and
		// CDI kinds (vendor.com/class), which are open-ended.
		"resources": allow{
			"limits":   anyContent,
			"requests": anyContent,
		},
		"volumeMounts":   leaves("name", "mountPath", "readOnly", "subPath"),
		"livenessProbe":  probeShape,
		"readinessProbe": probeShape,
		"startupProbe":   with(probeShape, leaves("successThreshold")),
		"securityContext": with(leaves("runAsUser", "runAsGroup", "readOnlyRootFilesystem", "privileged", "allowPrivilegeEscalation"), allow{
			"capabilities":    leaves("add", "drop"),
			"seccompProfile":  leaves("type", "localhostProfile"),
			"appArmorProfile": leaves("type", "localhostProfile"),
		}),
	})
	itemsShape   = leaves("key", "path")
	podSpecShape = with(leaves("restartPolicy", "hostname", "hostNetwork", "hostIPC", "hostPID", "hostUsers", "shareProcessNamespace", "terminationGracePeriodSeconds"), allow{
		"containers":     containerShape,
		"initContainers": containerShape,
		"volumes": with(leaves("name"), allow{
			"hostPath":              leaves("path", "type"),
			"emptyDir":              leaves("medium", "sizeLimit"),
			"persistentVolumeClaim": leaves("claimName", "readOnly"),
			"configMap":             with(leaves("name", "optional", "defaultMode"), allow{"items": itemsShape}),
			"secret":                with(leaves("secretName", "optional", "defaultMode"), allow{"items": itemsShape}),
			"image":                 leaves("reference", "pullPolicy"),
		}),
		"automountServiceAccountToken": falseOnly,
		"enableServiceLinks":           falseOnly,
		"hostAliases":                  leaves("ip", "hostnames"),
		"dnsConfig":                    leaves("nameservers", "searches"),
		"securityContext":              leaves("runAsUser", "runAsGroup", "supplementalGroups"),
	})
	templateShape = allow{"metadata": metaShape, "spec": podSpecShape}
	typeShape     = leaves("apiVersion", "kind")

	// shapes maps each kind the engine plays to the fields it honours.
	shapes = map[string]allow{
		kindPod:        with(typeShape, allow{"metadata": metaShape, "spec": podSpecShape, "status": allow{}}),
		kindDeployment: with(typeShape, allow{"metadata": metaShape, "spec": with(leaves("replicas", "selector"), allow{"template": templateShape}), "status": allow{}}),
		kindDaemonSet:  with(typeShape, allow{"metadata": metaShape, "spec": with(leaves("selector"), allow{"template": templateShape}), "status": allow{}}),
		kindJob:        with(typeShape, allow{"metadata": metaShape, "spec": allow{"template": templateShape}, "status": allow{}}),
		kindConfigMap:  with(typeShape, allow{"metadata": metaShape, "data": anyContent, "binaryData": anyContent, "immutable": anyContent}),
		kindSecret:     with(typeShape, allow{"metadata": metaShape, "data": anyContent, "stringData": anyContent, "type": anyContent, "immutable": anyContent}),
		kindPVC: with(typeShape, allow{"metadata": metaShape, "spec": allow{
			"accessModes": anyContent,
			"resources":   allow{"requests": leaves("storage")},
		}, "status": allow{}}),
		kindService: with(typeShape, allow{"metadata": metaShape, "spec": with(leaves("selector", "type"), allow{
			"ports": leaves("name", "port", "targetPort", "nodePort", "protocol"),
		}), "status": anyContent}),
	}
)

// kindNames lists the kinds the engine plays, for error messages.
func kindNames() string {
	names := make([]string, 0, len(shapes))
	for k := range shapes {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
