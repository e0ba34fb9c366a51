package userns

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestEnsure: the containers user gets the default range where it has
// none; other lines are kept; an existing range is used as it is.
func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	f := Files{SubUID: filepath.Join(dir, "subuid"), SubGID: filepath.Join(dir, "subgid")}
	os.WriteFile(f.SubUID, []byte("alice:100000:65536"), 0o644)
	r, err := Ensure(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.UIDs) != 1 || r.UIDs[0] != (Range{DefaultStart, DefaultSize}) || len(r.GIDs) != 1 {
		t.Fatalf("ranges %+v", r)
	}
	data, _ := os.ReadFile(f.SubUID)
	if string(data) != "alice:100000:65536\ncontainers:2147483647:2147483648\n" {
		t.Fatalf("subuid %q", data)
	}
	os.WriteFile(f.SubGID, []byte("containers:200000:1000\ncontainers:300000:1000\n"), 0o644)
	if r, err = Ensure(f); err != nil || len(r.GIDs) != 2 || r.GIDs[1].Start != 300000 {
		t.Fatalf("existing ranges: %+v %v", r, err)
	}
	os.WriteFile(f.SubGID, []byte("containers:x:1\n"), 0o644)
	if _, err := Ensure(f); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a malformed line: %v", err)
	}
}

// TestCheckMaps: explicit maps lie in the ranges, outside those in use,
// and map no ID twice; the error names the option.
func TestCheckMaps(t *testing.T) {
	ranges := []Range{{100000, 1000}, {101000, 1000}}
	inUse := []core.IDMap{{ContainerID: 0, HostID: 101500, Size: 100}}
	for _, tc := range []struct {
		name string
		maps []core.IDMap
		want string
	}{
		{"inside", []core.IDMap{{ContainerID: 0, HostID: 100000, Size: 1500}}, ""},
		{"two pieces", []core.IDMap{{ContainerID: 0, HostID: 100000, Size: 10}, {ContainerID: 10, HostID: 100500, Size: 10}}, ""},
		{"below", []core.IDMap{{ContainerID: 0, HostID: 99999, Size: 2}}, "not within"},
		{"beyond", []core.IDMap{{ContainerID: 0, HostID: 101900, Size: 200}}, "not within"},
		{"in use", []core.IDMap{{ContainerID: 0, HostID: 101400, Size: 200}}, "overlap another container"},
		{"container ids twice", []core.IDMap{{ContainerID: 0, HostID: 100000, Size: 10}, {ContainerID: 5, HostID: 100500, Size: 10}}, "mapped twice"},
		{"host ids twice", []core.IDMap{{ContainerID: 0, HostID: 100000, Size: 10}, {ContainerID: 20, HostID: 100005, Size: 10}}, "mapped twice"},
		{"empty", []core.IDMap{{ContainerID: 0, HostID: 100000, Size: 0}}, "not a valid range"},
	} {
		err := CheckMaps("uidmap", tc.maps, ranges, inUse)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != "uidmap" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a uidmap error saying %q", tc.name, err, tc.want)
		}
	}
}
