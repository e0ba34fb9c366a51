package core

import (
	"context"
	"fmt"
	"net/http"
)

// Workload kinds GenerateKube writes (its type parameter).
const (
	KubeTypePod        = "pod"
	KubeTypeDeployment = "deployment"
	KubeTypeDaemonSet  = "daemonset"
	KubeTypeJob        = "job"
)

// KubeGenerator writes Kubernetes YAML for the engine's containers, pods and
// volumes (podman kube generate).
type KubeGenerator interface {
	// GenerateKube answers a multi-document YAML stream: a
	// PersistentVolumeClaim per volume, with Service a Service per workload,
	// then a workload for the named pods and one for the named containers.
	// An unknown name is ErrNoSuchContainer.
	GenerateKube(ctx context.Context, opts KubeGenerateOptions) ([]byte, error)
}

// KubeGenerateOptions are GenerateKube's query parameters.
type KubeGenerateOptions struct {
	// NamesOrIDs name containers, pods and volumes (at least one).
	NamesOrIDs []string
	// Service adds a NodePort Service for each workload's ports.
	Service bool
	// Type is the workload kind: KubeTypePod (default), KubeTypeDeployment,
	// KubeTypeDaemonSet or KubeTypeJob.
	Type string
	// Replicas is a Deployment's replica count (default 1); it needs
	// Type deployment.
	Replicas int32
	// NoTrunc keeps annotation values longer than Kubernetes' 63 characters.
	NoTrunc bool
	// PodmanOnly adds the annotations only Podman reads back
	// (io.podman.annotations.*).
	PodmanOnly bool
}

// KubeApplier sends Kubernetes objects to a cluster's API server (podman
// kube apply).
type KubeApplier interface {
	// KubeApply creates or updates (server-side apply) every object of the
	// YAML stream. A refusal by the API server is a *ClusterError.
	KubeApply(ctx context.Context, yaml []byte, opts KubeApplyOptions) error
}

// KubeApplyOptions say what KubeApply sends and to which cluster.
type KubeApplyOptions struct {
	// NamesOrIDs, instead of YAML, name the containers, pods and volumes
	// whose generated YAML is applied; Service adds their Services.
	NamesOrIDs []string
	Service    bool
	// KubeConfig is the absolute path of a kubeconfig file on the engine's host.
	KubeConfig string
	// CACertFile, when set, is the absolute path of the PEM bundle that
	// verifies the API server (instead of the kubeconfig's).
	CACertFile string
	// Namespace, when set, replaces the objects' and the kubeconfig's namespace.
	Namespace string
}

// ClusterError is a Kubernetes API server's refusal of one object.
// It is an ErrInvalidArgument when the server found the object invalid or
// named something it does not have (400, 404, 422 from the server), an
// ErrStateConflict on a conflict (409); otherwise a plain (500) error.
type ClusterError struct {
	// Object names the object as Kind/namespace/name.
	Object string
	// Status is the API server's HTTP status (0 when it was not reached).
	Status int
	// Err is the server's message.
	Err error
}

// Error names the object, the server's status and its message.
func (e *ClusterError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("kube apply %s: %v", e.Object, e.Err)
	}
	return fmt.Sprintf("kube apply %s: API server answered %d: %v", e.Object, e.Status, e.Err)
}

// Unwrap returns the server's error.
func (e *ClusterError) Unwrap() error { return e.Err }

// Is maps the API server's status onto the engine's domain errors.
func (e *ClusterError) Is(target error) bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity:
		return target == ErrInvalidArgument
	case http.StatusConflict:
		return target == ErrStateConflict
	}
	return false
}
