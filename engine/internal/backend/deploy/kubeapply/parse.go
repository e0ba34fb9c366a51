package kubeapply

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/berth-project/berth/engine/internal/core"
)

// maxDocument bounds one YAML document of a kube apply body.
const maxDocument = 4 << 20

// strict decodes JSON into the k8s.io/api types, refusing unknown and
// duplicate fields.
var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Strict: true})

// ParseObjects splits a multi-document YAML stream into its objects. Every
// document must be an object of a kind the k8s.io/api types know, decode
// strictly into its type and have a name; empty documents are skipped. An
// error is an ErrInvalidArgument naming the document (1-based) and, where
// the decoder says, the field.
func ParseObjects(data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReaderSize(bytes.NewReader(data), 4096))
	var objs []*unstructured.Unstructured
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, core.InvalidArgument("body", fmt.Errorf("document %d: %w", n, err))
		}
		if len(doc) > maxDocument {
			return nil, core.InvalidArgument("body", fmt.Errorf("document %d: larger than %d bytes", n, maxDocument))
		}
		if isBlank(doc) {
			continue
		}
		obj, err := parseDocument(doc)
		if err != nil {
			return nil, core.InvalidArgument("body", fmt.Errorf("document %d: %w", n, err))
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, core.InvalidArgument("body", errors.New("no Kubernetes object in the YAML"))
	}
	return objs, nil
}

// isBlank is true for a document of comments and whitespace only.
func isBlank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

func parseDocument(doc []byte) (*unstructured.Unstructured, error) {
	raw, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	gvk := obj.GroupVersionKind()
	if !scheme.Scheme.Recognizes(gvk) {
		return nil, fmt.Errorf("kind %s of apiVersion %q is not a Kubernetes API kind", gvk.Kind, gvk.GroupVersion())
	}
	if _, _, err := strict.Decode(raw, nil, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("%s: metadata.name is missing", gvk.Kind)
	}
	// What only a server sets is not sent back to one.
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(obj.Object, "status")
	return obj, nil
}
