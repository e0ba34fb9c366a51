package core

import (
	"context"
	"fmt"
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
// It is the error Kind names (the applier sets ErrInvalidArgument for an
// object the server found invalid or one naming something it does not
// have, ErrStateConflict for a conflict); otherwise a plain (500) error.
type ClusterError struct {
	// Object names the object as Kind/namespace/name.
	Object string
	// Status is the API server's HTTP status (0 when it was not reached).
	Status int
	// Kind is the domain error the server's status maps to
	// (ErrInvalidArgument, ErrStateConflict), nil for any other failure.
	Kind error
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

// Is reports whether target is the domain error the server's status maps to.
func (e *ClusterError) Is(target error) bool {
	return e.Kind != nil && target == e.Kind
}
