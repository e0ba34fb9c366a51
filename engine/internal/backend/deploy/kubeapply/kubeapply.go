// Package kubeapply sends Kubernetes objects to a cluster's API server with
// client-go (podman kube apply): each object of the YAML is created or
// updated by server-side apply through the dynamic client, its resource
// found by the server's discovery.
package kubeapply

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/berth-project/berth/engine/internal/core"
)

// FieldManager is the server-side apply field manager the engine applies as.
const FieldManager = "berth-engine"

// maxConfigFile bounds the kubeconfig and CA files the engine reads.
const maxConfigFile = 1 << 20

// requestTimeout bounds each request to the API server.
const requestTimeout = 30 * time.Second

// Applier applies YAML, or the YAML the generator writes for named
// objects, to a cluster.
type Applier struct {
	gen core.KubeGenerator
}

// New returns an applier; gen writes the YAML of KubeApplyOptions.NamesOrIDs.
func New(gen core.KubeGenerator) *Applier {
	return &Applier{gen: gen}
}

// KubeApply sends every object of data (or of the YAML generated for
// opts.NamesOrIDs) to the cluster opts.KubeConfig names.
func (a *Applier) KubeApply(ctx context.Context, data []byte, opts core.KubeApplyOptions) error {
	cfg, namespace, err := restConfig(opts)
	if err != nil {
		return err
	}
	if len(opts.NamesOrIDs) > 0 {
		if len(data) > 0 {
			return core.InvalidArgument("namesOrIDs", errors.New("send either YAML in the body or namesOrIDs, not both"))
		}
		data, err = a.gen.GenerateKube(ctx, core.KubeGenerateOptions{NamesOrIDs: opts.NamesOrIDs, Service: opts.Service})
		if err != nil {
			return err
		}
	} else if opts.Service {
		return core.InvalidArgument("service", errors.New("service applies to YAML generated from namesOrIDs"))
	}
	objs, err := ParseObjects(data)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return &core.ClusterError{Object: cfg.Host, Err: err}
	}
	groups, err := restmapper.GetAPIGroupResources(disc)
	if err != nil {
		return clusterError(cfg.Host, err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return &core.ClusterError{Object: cfg.Host, Err: err}
	}
	for _, obj := range objs {
		if err := apply(ctx, client, mapper, obj, namespace, opts.Namespace != ""); err != nil {
			return err
		}
	}
	return nil
}

// apply creates or updates one object.
func apply(ctx context.Context, client dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, namespace string, force bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return core.InvalidArgument("body", fmt.Errorf("%s %s: the API server serves no such kind: %w", gvk.Kind, obj.GetName(), err))
	}
	var res dynamic.ResourceInterface = client.Resource(mapping.Resource)
	name := gvk.Kind + "/" + obj.GetName()
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if force || obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
		res = client.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		name = gvk.Kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
	}
	if _, err := res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return clusterError(name, err)
	}
	return nil
}

// clusterError names the object an API server error is about.
func clusterError(object string, err error) error {
	status := 0
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		status = int(apiStatus.Status().Code)
	}
	e := &core.ClusterError{Object: object, Status: status, Err: err}
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity:
		// The server found the object invalid, or it names something the
		// server does not have.
		e.Kind = core.ErrInvalidArgument
	case http.StatusConflict:
		e.Kind = core.ErrStateConflict
	}
	return e
}

// restConfig reads the kubeconfig (and CA file) into a client config and
// the namespace objects without one go to.
func restConfig(opts core.KubeApplyOptions) (*rest.Config, string, error) {
	if opts.KubeConfig == "" {
		return nil, "", core.InvalidArgument("kubeConfig", errors.New("the path of a kubeconfig file on the engine's host is required"))
	}
	data, err := readHostFile("kubeConfig", opts.KubeConfig)
	if err != nil {
		return nil, "", err
	}
	cfg, namespace, err := clientConfig(data, opts.Namespace)
	if err != nil {
		return nil, "", err
	}
	if opts.CACertFile != "" {
		pem, err := readHostFile("caCertFile", opts.CACertFile)
		if err != nil {
			return nil, "", err
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, "", core.InvalidArgument("caCertFile", fmt.Errorf("%s holds no PEM certificate", opts.CACertFile))
		}
		cfg.TLSClientConfig.CAFile = ""
		cfg.TLSClientConfig.CAData = pem
		cfg.TLSClientConfig.Insecure = false
	}
	return cfg, namespace, nil
}

// clientConfig parses a kubeconfig. Credential plugins (exec,
// auth-provider) are refused: they would run programs on the engine's host
// for whoever may call the engine.
func clientConfig(data []byte, namespace string) (*rest.Config, string, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, "", core.InvalidArgument("kubeConfig", fmt.Errorf("not a kubeconfig: %w", err))
	}
	for name, auth := range raw.AuthInfos {
		if auth.Exec != nil || auth.AuthProvider != nil {
			return nil, "", core.InvalidArgument("kubeConfig", fmt.Errorf("user %q uses a credential plugin, which the engine does not run", name))
		}
		if err := absolutePaths(auth.TokenFile, auth.ClientCertificate, auth.ClientKey); err != nil {
			return nil, "", core.InvalidArgument("kubeConfig", fmt.Errorf("user %q: %w", name, err))
		}
	}
	for name, cluster := range raw.Clusters {
		if err := absolutePaths(cluster.CertificateAuthority); err != nil {
			return nil, "", core.InvalidArgument("kubeConfig", fmt.Errorf("cluster %q: %w", name, err))
		}
	}
	overrides := &clientcmd.ConfigOverrides{}
	if namespace != "" {
		overrides.Context = clientcmdapi.Context{Namespace: namespace}
	}
	cc := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, overrides, nil)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", core.InvalidArgument("kubeConfig", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", core.InvalidArgument("kubeConfig", err)
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	cfg.Timeout = requestTimeout
	cfg.UserAgent = FieldManager
	return cfg, ns, nil
}

// absolutePaths refuses relative file paths in a kubeconfig: the engine
// reads the kubeconfig's content, not from its directory.
func absolutePaths(paths ...string) error {
	for _, p := range paths {
		if p != "" && !filepath.IsAbs(p) {
			return fmt.Errorf("%q is a relative path", p)
		}
	}
	return nil
}

// readHostFile reads a file the request names on the engine's host: an
// absolute path to a readable regular file of at most maxConfigFile bytes.
func readHostFile(field, path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, core.InvalidArgument(field, fmt.Errorf("%q is not an absolute path", path))
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, core.InvalidArgument(field, fmt.Errorf("%s cannot be read: %w", path, err))
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxConfigFile {
		return nil, core.InvalidArgument(field, fmt.Errorf("%s is not a regular file of at most %d bytes", path, maxConfigFile))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, core.InvalidArgument(field, fmt.Errorf("%s cannot be read: %w", path, err))
	}
	return data, nil
}
