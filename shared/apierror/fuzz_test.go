package apierror

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzProblemUnmarshal decodes arbitrary bytes as a problem document (the
// uploads service's clients read them from the network): no panic, and an
// accepted document re-encodes to one that decodes to the same standard
// members and the same Extra members.
func FuzzProblemUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"type":"about:blank","title":"Conflict","status":409,"detail":"upload is pending","uuid":"u"}`,
		`{"status":"409"}`,
		`{"extra":{"nested":[1,2,{"a":null}]},"status":404}`,
		`{"type":null,"detail":"x","type":"y"}`,
		`[]`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Problem
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		encoded, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", p, err)
		}
		var again Problem
		if err := json.Unmarshal(encoded, &again); err != nil {
			t.Fatalf("Unmarshal(%s) of our own encoding: %v", encoded, err)
		}
		want := p.withDefaults()
		if again.Type != want.Type || again.Title != want.Title || again.Status != want.Status || again.Detail != want.Detail {
			t.Fatalf("standard members %+v became %+v", want, again)
		}
		if len(p.Extra) != 0 && !reflect.DeepEqual(again.Extra, p.Extra) {
			t.Fatalf("extra members %v became %v", p.Extra, again.Extra)
		}
	})
}
