package systemapi

import (
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/testimage"
)

// check runs POST /system/check with query and decodes the report.
func (te *testEngine) check(query string) core.SystemCheckReport {
	te.T.Helper()
	var report core.SystemCheckReport
	te.Decode(te.Must(http.StatusOK, "POST", "/system/check?"+query, nil), &report)
	return report
}

// TestSystemCheckRepairsStorageAndState damages the store and the state
// database behind the engine's back (a layer's file, a container's storage,
// an exec session of no container, a volume's directory, a stray volume
// directory), then checks that the check finds each, that repair fixes what
// it may, and that the store is clean afterwards with the sound objects kept.
func TestSystemCheckRepairsStorageAndState(t *testing.T) {
	te := startEngine(t)
	te.Load(testimage.Busybox("localhost/chk-sound:1", "sh"), imageWith([]string{"localhost/chk-damaged:1"}, "damaged.bin", 4096, nil))
	sound := te.Create(map[string]any{"image": "localhost/chk-sound:1", "name": "chk-sound", "command": []string{"true"}})
	lost := te.Create(map[string]any{"image": "localhost/chk-sound:1", "name": "chk-lost", "command": []string{"true"}})
	volume := te.volumeMountpoint("chk-vol")
	if clean := te.check(""); clean.Errors {
		t.Fatalf("a fresh store has errors: %+v", clean)
	}

	store := te.Eng.Images().Storage()
	damaged, err := store.Image("localhost/chk-damaged:1")
	if err != nil {
		t.Fatal(err)
	}
	layerDir := filepath.Join(store.GraphRoot(), "overlay", damaged.TopLayer, "diff")
	if store.GraphDriverName() == "vfs" {
		layerDir = filepath.Join(store.GraphRoot(), "vfs", "dir", damaged.TopLayer)
	}
	if err := os.Remove(filepath.Join(layerDir, "damaged.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Unmount(lost, true); err != nil {
		t.Logf("unmount %s: %v", lost, err)
	}
	if err := store.DeleteContainer(lost); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(te.Root, "state.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	// Written without foreign keys, as a damaged or foreign writer would.
	if _, err := db.Exec(`INSERT INTO exec_sessions (id, container_id, created, data) VALUES ('chk-orphan', 'no-such-container', 0, '{}')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.RemoveAll(filepath.Dir(volume)); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(te.Root, "volumes", "chk-stray", "_data")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}

	found := te.check("")
	if !found.Errors || len(found.Layers)+len(found.Images) == 0 {
		t.Errorf("the damaged layer was not found: %+v", found)
	}
	if len(found.Containers[lost]) == 0 {
		t.Errorf("the container without storage was not found: %+v", found.Containers)
	}
	for _, key := range []string{"exec session chk-orphan", "volume chk-vol", "volume directory chk-stray"} {
		if len(found.State[key]) == 0 {
			t.Errorf("state check did not report %q: %+v", key, found.State)
		}
	}
	if len(found.RemovedImages)+len(found.RemovedContainers)+len(found.RepairedState) != 0 {
		t.Errorf("a check without repair changed something: %+v", found)
	}

	repaired := te.check("repair=true")
	if _, ok := repaired.RemovedImages[damaged.ID]; !ok {
		t.Errorf("repair did not remove the damaged image %s: %+v", damaged.ID, repaired.RemovedImages)
	}
	if _, ok := repaired.RemovedContainers[lost]; !ok {
		t.Errorf("repair did not remove the container without storage: %+v", repaired.RemovedContainers)
	}
	if repaired.RepairedState["exec session chk-orphan"] == "" || repaired.RepairedState["volume chk-vol"] == "" {
		t.Errorf("repaired state: %+v", repaired.RepairedState)
	}
	if _, ok := repaired.RepairedState["volume directory chk-stray"]; ok {
		t.Error("repair without repair_lossy removed a volume directory without a record")
	}
	if _, err := os.Stat(volume); err != nil {
		t.Errorf("the volume directory was not recreated: %v", err)
	}
	lossy := te.check("repair_lossy=true")
	if lossy.RepairedState["volume directory chk-stray"] != "removed" {
		t.Errorf("repair_lossy: %+v", lossy.RepairedState)
	}
	if after := te.check(""); after.Errors {
		t.Errorf("errors after repair: %+v", after)
	}
	te.Must(http.StatusNoContent, "GET", "/containers/"+sound+"/exists", nil)
	te.Must(http.StatusNotFound, "GET", "/containers/"+lost+"/exists", nil)
	te.Must(http.StatusNoContent, "GET", "/images/localhost%2Fchk-sound:1/exists", nil)
	te.Must(http.StatusNoContent, "GET", "/volumes/chk-vol/exists", nil)
}
