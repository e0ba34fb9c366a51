// Package kube plays Kubernetes YAML on the engine (kube play and kube
// down): it parses Pods, Deployments, DaemonSets, Jobs, ConfigMaps,
// Secrets, PersistentVolumeClaims and Services with the Kubernetes API
// types and creates pods, containers, volumes and secrets through the
// engine's core interfaces.
package kube

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/berth-project/berth/engine/internal/core"
)

// The kinds the engine plays.
const (
	kindPod        = "Pod"
	kindDeployment = "Deployment"
	kindDaemonSet  = "DaemonSet"
	kindJob        = "Job"
	kindConfigMap  = "ConfigMap"
	kindSecret     = "Secret"
	kindPVC        = "PersistentVolumeClaim"
	kindService    = "Service"
)

// maxDocuments bounds the documents of one request.
const maxDocuments = 1000

// document is one parsed YAML document.
type document struct {
	// Index counts documents from 0 in the order they appear.
	Index int
	Kind  string
	Name  string

	Pod        *v1.Pod
	Deployment *appsv1.Deployment
	DaemonSet  *appsv1.DaemonSet
	Job        *batchv1.Job
	ConfigMap  *v1.ConfigMap
	Secret     *v1.Secret
	PVC        *v1.PersistentVolumeClaim
	Service    *v1.Service
}

// docError is an ErrInvalidArgument naming the document and its field;
// the reason is kept as text only, so that a wrapped sentinel (a missing
// image) does not turn the refusal into another status.
func docError(index int, kind, name, field string, err error) error {
	where := fmt.Sprintf("document %d", index)
	if kind != "" {
		where += " (" + kind
		if name != "" {
			where += " " + name
		}
		where += ")"
	}
	if field != "" {
		where += " field " + field
	}
	return core.InvalidArgument(where, errors.New(err.Error()))
}

func (d *document) fail(field string, err error) error {
	return docError(d.Index, d.Kind, d.Name, field, err)
}

// parseDocuments splits multi-document YAML and decodes every document
// into its Kubernetes type. Empty documents are skipped; a document that
// is not a Kubernetes object, of a kind the engine does not play, or with
// a field it does not honour is an ErrInvalidArgument naming it.
func parseDocuments(data []byte) ([]*document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []*document
	for index := 0; ; index++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, docError(index, "", "", "", fmt.Errorf("not YAML: %w", err))
		}
		if index >= maxDocuments {
			return nil, docError(index, "", "", "", fmt.Errorf("more than %d documents", maxDocuments))
		}
		doc, err := parseDocument(index, raw)
		if err != nil {
			return nil, err
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		return nil, core.InvalidArgument("body", errors.New("the YAML holds no Kubernetes document"))
	}
	return docs, nil
}

func parseDocument(index int, raw []byte) (*document, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, docError(index, "", "", "", fmt.Errorf("not YAML: %w", err))
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return nil, nil
	}
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		return nil, docError(index, "", "", "", fmt.Errorf("not YAML: %w", err))
	}
	object, ok := generic.(map[string]any)
	if !ok {
		return nil, docError(index, "", "", "", errors.New("not a Kubernetes object (a YAML mapping with apiVersion and kind)"))
	}
	kind, _ := object["kind"].(string)
	apiVersion, _ := object["apiVersion"].(string)
	meta, _ := object["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	doc := &document{Index: index, Kind: kind, Name: name}
	if kind == "" {
		return nil, doc.fail("kind", errors.New("missing: not a Kubernetes object"))
	}
	shape, known := shapes[kind]
	if !known {
		return nil, doc.fail("kind", fmt.Errorf("%q is not a kind the engine plays (%s)", kind, kindNames()))
	}
	if want := kinds[kind].apiVersion; apiVersion != want {
		return nil, doc.fail("apiVersion", fmt.Errorf("%q is not %s", apiVersion, want))
	}
	if bad := unsupported(object, shape, ""); bad != "" {
		return nil, doc.fail(bad, errors.New("is not supported by this engine"))
	}
	target := kinds[kind].target(doc)
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(target); err != nil {
		return nil, doc.fail(jsonField(err), err)
	}
	if name == "" {
		return nil, doc.fail("metadata.name", errors.New("missing"))
	}
	if !validName(name) {
		return nil, doc.fail("metadata.name", fmt.Errorf("%q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", name))
	}
	if ns, _ := meta["namespace"].(string); ns != "" && ns != "default" {
		return nil, doc.fail("metadata.namespace", fmt.Errorf("%q: the engine has only the default namespace", ns))
	}
	return doc, nil
}

// allocate sets *field to a new object for a document to decode into and
// returns it.
func allocate[T any](field **T) any {
	*field = new(T)
	return *field
}

// kinds are the kinds the engine plays: each one's API version and the
// object its documents decode into.
var kinds = map[string]struct {
	apiVersion string
	target     func(d *document) any
}{
	kindPod:        {"v1", func(d *document) any { return allocate(&d.Pod) }},
	kindDeployment: {"apps/v1", func(d *document) any { return allocate(&d.Deployment) }},
	kindDaemonSet:  {"apps/v1", func(d *document) any { return allocate(&d.DaemonSet) }},
	kindJob:        {"batch/v1", func(d *document) any { return allocate(&d.Job) }},
	kindConfigMap:  {"v1", func(d *document) any { return allocate(&d.ConfigMap) }},
	kindSecret:     {"v1", func(d *document) any { return allocate(&d.Secret) }},
	kindPVC:        {"v1", func(d *document) any { return allocate(&d.PVC) }},
	kindService:    {"v1", func(d *document) any { return allocate(&d.Service) }},
}

// jsonField names the member a JSON type error is about.
func jsonField(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return typeErr.Field
	}
	return ""
}

func validName(n string) bool {
	for i, r := range n {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '_' && r != '.' && r != '-')) {
			return false
		}
	}
	return n != "" && len(n) <= 253
}
