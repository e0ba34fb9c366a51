package core

import (
	"context"
	"io"
	"net"
)

// KubePlayer turns Kubernetes YAML into engine objects (kube play) and
// removes them again (kube down). YAML that is not Kubernetes, an unknown
// kind, a field the engine does not honour or a missing image is an
// ErrInvalidArgument naming the document (index, kind, name) and the field;
// a play that fails removes what it created before it answers.
type KubePlayer interface {
	// Play creates (and unless opts.Start is false, starts) what the
	// multi-document YAML describes.
	Play(ctx context.Context, yaml []byte, opts KubePlayOptions) (*KubePlayReport, error)
	// PlayArchive is Play of a tar holding play.yaml (or, without it, the
	// *.yaml and *.yml files at its top level) and the files the YAML
	// references (build contexts). Entries escaping the archive's root are
	// ErrInvalidArgument.
	PlayArchive(ctx context.Context, archive io.Reader, opts KubePlayOptions) (*KubePlayReport, error)
	// Down stops and removes the pods the YAML describes and the secrets
	// it created; with Force also the volumes of its claims, ConfigMaps
	// and Secrets. Pods already gone are skipped (a report with nothing
	// removed), as Podman's down does.
	Down(ctx context.Context, yaml []byte, opts KubeDownOptions) (*KubePlayReport, error)
}

// KubePlayOptions are PlayKube's query parameters.
type KubePlayOptions struct {
	// Annotations are added to every pod's annotations.
	Annotations map[string]string
	// Networks replace the default kube network ("bridge", "host", "none"
	// or network names).
	Networks []string
	// StaticIPs and StaticMACs are given to the pods in order.
	StaticIPs  []net.IP
	StaticMACs []net.HardwareAddr
	// LogDriver is the containers' log driver ("" or k8s-file).
	LogDriver string
	// LogOptions are the log driver's options (none are supported).
	LogOptions []string
	// NoHosts leaves /etc/hosts as the image has it.
	NoHosts bool
	// PublishPorts are extra "[[ip:]hostPort:]containerPort[/proto]" ports
	// of every pod; PublishAllPorts publishes every container port on the
	// same host port.
	PublishPorts    []string
	PublishAllPorts bool
	// Replace removes pods of the same names first.
	Replace bool
	// Start starts the pods (nil: true).
	Start *bool
	// Wait waits for every container to exit, then removes what was
	// created (ExitCode in the report).
	Wait bool
	// Userns is the user namespace mode ("" or "host").
	Userns string
	// NoPodPrefix names each container as the YAML does, without its
	// pod's name before it (Podman 6's --no-pod-prefix).
	NoPodPrefix bool
	// Build builds images from a Containerfile in the archive's directory
	// named after the image (nil: only where the image is missing).
	Build *bool
	// TLSVerify and Auth are used for pulls.
	TLSVerify *bool
	Auth      *RegistryAuth
	// ContextDir holds the files the YAML references ("" for none).
	ContextDir string
	// ServiceContainer creates a service container for the play's pods
	// (podman kube play --service-container): started before them, stopped
	// when all of them have exited, removed with them.
	ServiceContainer bool
}

// KubeDownOptions are PlayKubeDown's query parameters.
type KubeDownOptions struct {
	// Force also removes the volumes the YAML's claims, ConfigMaps and
	// Secrets stand for.
	Force bool
}

// KubePlayPod is one pod of a KubePlayReport (Podman's PlayKubePod).
type KubePlayPod struct {
	ID             string   `json:"ID"`
	Containers     []string `json:"Containers"`
	InitContainers []string `json:"InitContainers"`
	Logs           []string `json:"Logs"`
	// ContainerErrors is null when there are none, as Podman's.
	ContainerErrors []string `json:"ContainerErrors"`
}

// KubePlayVolume is one volume a play created.
type KubePlayVolume struct {
	Name string `json:"Name"`
}

// KubePlaySecret is one secret a play created.
type KubePlaySecret struct {
	CreateReport *KubeSecretCreateReport `json:"CreateReport"`
}

// KubeSecretCreateReport is Podman's SecretCreateReport.
type KubeSecretCreateReport struct {
	ID string `json:"ID"`
}

// KubePodStopReport is one stopped pod of a down (Podman's PodStopReport;
// Errs stays empty: a failure fails the request).
type KubePodStopReport struct {
	Errs []string `json:"Errs"`
	ID   string   `json:"Id"`
}

// KubeVolumeRmReport is one removed volume of a down.
type KubeVolumeRmReport struct {
	Err *string `json:"Err"`
	ID  string  `json:"Id"`
}

// KubeSecretRmReport is one removed secret of a down.
type KubeSecretRmReport struct {
	Err *string `json:"Err"`
	ID  string  `json:"ID"`
}

// KubePlayReport answers PlayKube and PlayKubeDown in Podman's shape.
type KubePlayReport struct {
	Pods           []KubePlayPod         `json:"Pods"`
	Volumes        []KubePlayVolume      `json:"Volumes"`
	StopReport     []*KubePodStopReport  `json:"StopReport"`
	RmReport       []*PodRmReport        `json:"RmReport"`
	VolumeRmReport []*KubeVolumeRmReport `json:"VolumeRmReport"`
	SecretRmReport []*KubeSecretRmReport `json:"SecretRmReport"`
	Secrets        []KubePlaySecret      `json:"Secrets"`
	// ServiceContainerID is the service container a play with
	// ServiceContainer created.
	ServiceContainerID string `json:"ServiceContainerID"`
	// ExitCode is set by a play with Wait: the highest exit code of its containers.
	ExitCode *int32 `json:"ExitCode"`
}
