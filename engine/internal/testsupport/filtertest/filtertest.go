// Package filtertest fuzzes the filters of a listing: any filters a client
// sends either compile or are refused as an invalid argument, and a
// compiled test never fails on an object.
package filtertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// Fuzz runs f over filters given as JSON (the seeds f was given): compile
// builds the listing's test, which then runs on obj.
func Fuzz[T any](f *testing.F, obj T, compile func(filters map[string][]string) (listfilter.Test[T], error)) {
	f.Fuzz(func(t *testing.T, raw string) {
		var filters map[string][]string
		if json.Unmarshal([]byte(raw), &filters) != nil {
			return
		}
		match, err := compile(filters)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%s: error %v is not an invalid argument", raw, err)
			}
			return
		}
		if _, err := match(context.Background(), obj); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	})
}
