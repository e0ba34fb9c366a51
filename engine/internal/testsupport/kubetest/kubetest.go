// Package kubetest writes the Kubernetes YAML that the kube tests play,
// generate from and apply: the parts every such document repeats (a
// Deployment's selector and template, a Pod's labels) around the
// containers a test names. It imports nothing of the engine, so that every
// test, unit or integration, can use it.
package kubetest

import (
	"fmt"
	"strings"
)

// Deployment is an apps/v1 Deployment of replicas pods labelled app: name,
// in namespace (none when empty), whose pods run containers: a YAML list
// written from column 0, as under a pod spec's "containers:".
func Deployment(name, namespace string, replicas int, containers string) string {
	meta := "  name: " + name + "\n"
	if namespace != "" {
		meta += "  namespace: " + namespace + "\n"
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
%sspec:
  replicas: %d
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
%s`, meta, replicas, name, name, indent(containers, "      "))
}

// Pod is a v1 Pod labelled app: name that runs containers, written as for
// Deployment.
func Pod(name, containers string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: %s}
spec:
  containers:
%s`, name, name, indent(containers, "  "))
}

// indent puts prefix before every line of text that is not empty.
func indent(text, prefix string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
