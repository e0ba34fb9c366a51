package handlers

import (
	"errors"
	"net/url"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// FuzzSecretCreateQuery feeds arbitrary query values (what a client sends
// to CreateSecret: labels and driveropts are JSON objects) to the query
// decoder: a refusal names the parameter, never a panic.
func FuzzSecretCreateQuery(f *testing.F) {
	for _, seed := range [][4]string{
		{"s1", "{}", `{"a":"b"}`, "true"}, {"", "notjson", "", "maybe"}, {"x", `{"path":"/tmp"}`, `{"a":1}`, "0"},
		{"y", "[]", "null", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, name, driverOpts, labels, replace string) {
		var q secretCreateQuery
		err := decodeValues(url.Values{"name": {name}, "driveropts": {driverOpts}, "labels": {labels}, "replace": {replace}}, &q)
		if err == nil {
			return
		}
		var fe *core.FieldError
		if !errors.As(err, &fe) || (fe.Field != "driveropts" && fe.Field != "labels" && fe.Field != "replace") {
			t.Fatalf("%v does not name a parameter", err)
		}
	})
}
