package containers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRequiresDependencies: a container created with dependencyContainers
// (podman's --requires) records them by ID (inspect's Dependencies); its
// start starts them first, theirs before them; a required container cannot
// be removed before its dependents, even with force (409 naming them),
// unless the removal takes them along (depend=true, podman rm --depend),
// which reports each. An unknown dependency is a 400 naming the member.
func TestRequiresDependencies(t *testing.T) {
	te := startEngine(t)
	te.loadBusybox()
	sleeper := []string{"sleep", "600"}
	db := te.create(map[string]any{"name": "db", "command": sleeper})
	cache := te.create(map[string]any{"name": "cache", "command": sleeper, "dependencyContainers": []string{"db"}})
	app := te.create(map[string]any{"name": "app", "command": sleeper, "dependencyContainers": []string{"cache", db[:12], "db"}})

	var c struct{ Dependencies []string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/app/json", nil), &c)
	if strings.Join(c.Dependencies, ",") != cache+","+db {
		t.Errorf("app's Dependencies %v, want [cache db] by ID", c.Dependencies)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/app/start", nil)
	for _, id := range []string{db, cache, app} {
		if st := te.inspect(id).State.Status; st != "running" {
			t.Errorf("after starting app, %s is %s", id, st)
		}
	}

	for _, q := range []string{"", "?force=true&timeout=0"} {
		status, body := te.Do("DELETE", "/containers/db"+q, nil)
		if status != http.StatusConflict || !strings.Contains(string(body), "dependent containers") || !strings.Contains(string(body), cache) {
			t.Errorf("DELETE db%s: %d %s, want a 409 naming cache", q, status, body)
		}
	}
	if st := te.inspect(db).State.Status; st != "running" {
		t.Fatalf("a refused removal left db %s", st)
	}
	status, body := te.Do("POST", "/containers/create", map[string]any{"name": "orphan", "image": "busybox", "dependencyContainers": []string{"nosuch"}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "dependencyContainers") || !strings.Contains(string(body), "nosuch") {
		t.Errorf("an unknown dependency: %d %s", status, body)
	}

	var removed []struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/containers/db?depend=true&force=true&timeout=0", nil), &removed)
	var ids []string
	for _, r := range removed {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != app+","+cache+","+db {
		t.Errorf("depend removal reported %v, want app, cache, db", ids)
	}
	for _, name := range []string{"db", "cache", "app", "orphan"} {
		if status, _ := te.Do("GET", "/containers/"+name+"/json", nil); status != http.StatusNotFound {
			t.Errorf("%s is still there (%d)", name, status)
		}
	}
}
