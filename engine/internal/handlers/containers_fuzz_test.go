package handlers

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// FuzzDecodeContainerSpec feeds arbitrary bodies to the create request
// decoder and the request validation: they must never panic, and every
// rejection must be a 400 that names a field.
func FuzzDecodeContainerSpec(f *testing.F) {
	f.Add([]byte(`{"command":["true"],"image":"busybox","netns":{},"stop_timeout":10}`))
	f.Add([]byte(`{"name":"x","image":"busybox","env":{"A":"b"},"r_limits":[{"type":"nofile","hard":-1,"soft":-1}],"resource_limits":{"memory":{"limit":67108864,"swap":134217728},"cpu":{"shares":512},"pids":{"limit":50}}}`))
	f.Add([]byte(`{"image":"busybox","mounts":[{"destination":"/mnt","type":"bind","source":"/tmp","options":["ro"]}],"healthconfig":{"Test":["CMD-SHELL","true"],"Interval":30000000000}}`))
	f.Add([]byte(`{"image":"busybox","r_limits":[{"type":"nofile","hard":1.5}]}`))
	f.Add([]byte(`{"image":5}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := decodeSpec(bytes.NewReader(body))
		if err == nil {
			err = spec.Validate()
		}
		requireFieldRejection(t, err)
	})
}

// requireFieldRejection fails the test unless err is nil or a rejection
// that names its field and answers 400.
func requireFieldRejection(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var fe *core.FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		t.Fatalf("rejection without a field: %v", err)
	}
	if httpwire.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("rejection %v maps to %d, want 400", err, httpwire.StatusOf(err))
	}
}
