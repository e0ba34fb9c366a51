package containers_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/testimage"
)

type volumeJSON struct {
	Name        string
	Driver      string
	Mountpoint  string
	Labels      map[string]string
	Scope       string
	Options     map[string]string
	UID         int
	GID         int
	Anonymous   bool
	NeedsCopyUp bool
}

func (te *testEngine) volumes(filters string) []volumeJSON {
	te.T.Helper()
	path := "/volumes/json"
	if filters != "" {
		path += "?filters=" + url.QueryEscape(filters)
	}
	return enginetest.Fetch[[]volumeJSON](te.Engine, path)
}

func volumeNames(vs []volumeJSON) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

func TestVolumeAPI(t *testing.T) {
	te := startEngine(t)
	var v volumeJSON
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/volumes/create",
		map[string]any{"Name": "data", "Labels": map[string]string{"app": "web"}, "Options": map[string]string{"UID": "1000"}}), &v)
	if v.Name != "data" || v.Driver != "local" || v.Scope != "local" || v.Labels["app"] != "web" || v.UID != 1000 || !v.NeedsCopyUp {
		t.Fatalf("created volume: %+v", v)
	}
	fi, err := os.Stat(v.Mountpoint)
	if err != nil || !fi.IsDir() || filepath.Base(v.Mountpoint) != "_data" {
		t.Fatalf("mountpoint %s: %v", v.Mountpoint, err)
	}
	var anon volumeJSON
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/volumes/create", ""), &anon)
	if len(anon.Name) != 64 {
		t.Fatalf("unnamed volume got name %q", anon.Name)
	}
	te.Must(http.StatusNoContent, "GET", "/volumes/data/exists", nil)
	te.Must(http.StatusNotFound, "GET", "/volumes/nope/exists", nil)
	te.Must(http.StatusOK, "GET", "/volumes/data/json", nil)
	te.Must(http.StatusNotFound, "GET", "/volumes/nope/json", nil)
	te.Must(http.StatusNotFound, "DELETE", "/volumes/nope", nil)

	// podman volume create --ignore (Podman 5): the existing volume, as it is.
	var again volumeJSON
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "data", "IgnoreIfExists": true, "Labels": map[string]string{"app": "other"}}), &again)
	if again.Name != "data" || again.Labels["app"] != "web" || again.Mountpoint != v.Mountpoint {
		t.Fatalf("create --ignore of an existing volume: %+v", again)
	}
	// podman volume create --uid/--gid (Podman 6): the directory's owner.
	var owned volumeJSON
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "owned", "UID": 1234, "GID": 4321}), &owned)
	if st, err := os.Stat(owned.Mountpoint); err != nil || owned.UID != 1234 || owned.GID != 4321 ||
		st.Sys().(*syscall.Stat_t).Uid != 1234 || st.Sys().(*syscall.Stat_t).Gid != 4321 {
		t.Fatalf("a volume with an owner: %+v %v", owned, err)
	}
	te.Must(http.StatusNoContent, "DELETE", "/volumes/owned", nil)

	// Bad input: nothing is created.
	te.Must(http.StatusConflict, "POST", "/volumes/create", map[string]any{"Name": "data"})
	for member, body := range map[string]map[string]any{
		"UID":     {"Name": "x", "UID": -1},
		"GID":     {"Name": "x", "GID": -5},
		"Surplus": {"Name": "x", "Surplus": true},
	} {
		if status, out := te.Do("POST", "/volumes/create", body); status != http.StatusBadRequest || !strings.Contains(string(out), member) {
			t.Errorf("create %v: %d %s, want a 400 naming %s", body, status, out, member)
		}
	}
	te.Must(http.StatusBadRequest, "POST", "/volumes/create", map[string]any{"Name": "../x"})
	te.Must(http.StatusBadRequest, "POST", "/volumes/create", map[string]any{"Name": "x", "Driver": "nfs"})
	te.Must(http.StatusBadRequest, "POST", "/volumes/create", map[string]any{"Name": "x", "Options": map[string]string{"device": "/dev/sda"}})
	te.Must(http.StatusBadRequest, "POST", "/volumes/create", "{not json")
	te.Must(http.StatusBadRequest, "GET", "/volumes/json?filters="+url.QueryEscape(`{"colour":["red"]}`), nil)
	te.Must(http.StatusBadRequest, "GET", "/volumes/json?filters="+url.QueryEscape(`{"dangling":["maybe"]}`), nil)
	te.Must(http.StatusBadRequest, "POST", "/volumes/prune?filters="+url.QueryEscape(`{"name":["data"]}`), nil)
	if got := volumeNames(te.volumes("")); len(got) != 2 || !slices.Contains(got, "data") {
		t.Fatalf("volumes after bad requests: %v", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(te.Root, "volumes")); len(entries) != 2 {
		t.Fatalf("volume directories: %v", entries)
	}

	if got := volumeNames(te.volumes(`{"label":["app=web"]}`)); !slices.Equal(got, []string{"data"}) {
		t.Fatalf("label filter: %v", got)
	}
	if got := volumeNames(te.volumes(`{"name":["data"],"driver":["local"]}`)); !slices.Equal(got, []string{"data"}) {
		t.Fatalf("name filter: %v", got)
	}
	if got := te.volumes(`{"label":["app=db"]}`); len(got) != 0 {
		t.Fatalf("label filter matched %v", got)
	}

	// Prune keeps what a container uses and honours label filters.
	id := te.create(map[string]any{"command": []string{"true"}, "volumes": []map[string]any{{"Name": "data", "Dest": "/data"}}})
	if got := volumeNames(te.volumes(`{"dangling":["true"]}`)); !slices.Equal(got, []string{anon.Name}) {
		t.Fatalf("dangling: %v", got)
	}
	var reports []struct {
		ID   string `json:"Id"`
		Size uint64
	}
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/volumes/prune?filters="+url.QueryEscape(`{"label":["app=web"]}`), nil), &reports)
	if len(reports) != 0 {
		t.Fatalf("prune with label removed %+v", reports)
	}
	// Podman 6's --dry-run: what would go, and nothing goes.
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/volumes/prune?dryrun=true", nil), &reports)
	if len(reports) != 1 || reports[0].ID != anon.Name {
		t.Fatalf("prune --dry-run: %+v", reports)
	}
	te.Must(http.StatusOK, "GET", "/volumes/"+anon.Name+"/json", nil)
	te.Must(http.StatusBadRequest, "POST", "/volumes/prune?dryrun=maybe", nil)
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/volumes/prune", nil), &reports)
	if len(reports) != 1 || reports[0].ID != anon.Name {
		t.Fatalf("prune: %+v", reports)
	}
	if _, err := os.Stat(anon.Mountpoint); !os.IsNotExist(err) {
		t.Fatalf("pruned volume's directory: %v", err)
	}
	te.Must(http.StatusConflict, "DELETE", "/volumes/data", nil)
	te.Must(http.StatusNoContent, "DELETE", "/volumes/data?force=true", nil)
	te.Must(http.StatusNotFound, "GET", "/containers/"+id+"/json", nil)
	if _, err := os.Stat(v.Mountpoint); !os.IsNotExist(err) {
		t.Fatalf("removed volume's directory: %v", err)
	}
}

func TestVolumesInContainers(t *testing.T) {
	te := startEngine(t)
	code, out := te.run(map[string]any{
		"command": []string{"sh", "-c", "echo shared > /data/f"},
		"volumes": []map[string]any{{"Name": "shared", "Dest": "/data"}},
	})
	if code != 0 {
		t.Fatalf("writer: %d %v", code, out)
	}
	code, out = te.run(map[string]any{
		"command": []string{"cat", "/mnt/f"},
		"volumes": []map[string]any{{"Name": "shared", "Dest": "/mnt", "Options": []string{"ro"}}},
	})
	if code != 0 || !slices.Equal(out, []string{"shared"}) {
		t.Fatalf("reader: %d %v", code, out)
	}
	code, out = te.run(map[string]any{
		"command": []string{"sh", "-c", "echo x > /mnt/g"},
		"volumes": []map[string]any{{"Name": "shared", "Dest": "/mnt", "Options": []string{"ro"}}},
	})
	if code == 0 {
		t.Fatalf("write to a read-only volume succeeded: %v", out)
	}

	// An image volume becomes an anonymous volume holding the image's content.
	var buf bytes.Buffer
	img := testimage.Busybox("localhost/seeded:latest", "sh")
	img.Config.Volumes = []string{"/seeded"}
	img.Layers = append(img.Layers, testimage.Layer{Files: []testimage.File{
		{Path: "seeded", Dir: true}, {Path: "seeded/hello", Data: []byte("from the image\n")},
	}})
	if err := testimage.DockerArchive(&buf, img); err != nil {
		t.Fatal(err)
	}
	te.Must(http.StatusOK, "POST", "/images/load", &buf)
	id := te.create(map[string]any{
		"image":   "localhost/seeded:latest",
		"command": []string{"sh", "-c", "cat /seeded/hello; echo local > /anon/a"},
		"volumes": []map[string]any{{"Name": "", "Dest": "/anon"}},
	})
	var insp struct {
		Mounts []struct {
			Type, Name, Source, Destination, Driver string
			RW                                      bool
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &insp)
	var anon []string
	for _, m := range insp.Mounts {
		if m.Type != "volume" || m.Driver != "local" || len(m.Name) != 64 || !m.RW {
			t.Fatalf("mount %+v", m)
		}
		anon = append(anon, m.Name)
	}
	if len(anon) != 2 {
		t.Fatalf("mounts: %+v", insp.Mounts)
	}
	for _, v := range te.volumes(`{"anonymous":["true"]}`) {
		if !slices.Contains(anon, v.Name) || v.NeedsCopyUp {
			t.Fatalf("anonymous volume %+v", v)
		}
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := te.wait(id); code != 0 {
		t.Fatalf("exit %d: %v", code, te.LogLines(id))
	}
	if out := te.LogLines(id); !slices.Equal(out, []string{"from the image"}) {
		t.Fatalf("image content in the volume: %v", out)
	}
	te.Must(http.StatusConflict, "DELETE", "/volumes/"+anon[0], nil)
	// rm -v removes the anonymous volumes, not the named one.
	te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?v=true", nil)
	if got := volumeNames(te.volumes("")); !slices.Equal(got, []string{"shared"}) {
		t.Fatalf("volumes after rm -v: %v", got)
	}

	// --rm removes the anonymous volumes with the container.
	id = te.create(map[string]any{"command": []string{"true"}, "remove": true,
		"volumes": []map[string]any{{"Dest": "/scratch"}}})
	if n := len(te.volumes("")); n != 2 {
		t.Fatalf("%d volumes with the --rm container", n)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.wait(id)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(te.volumes("")) != 1; {
		time.Sleep(50 * time.Millisecond)
	}
	if got := volumeNames(te.volumes("")); !slices.Equal(got, []string{"shared"}) {
		t.Fatalf("volumes after --rm: %v", got)
	}

	// Without -v the anonymous volume stays; container prune removes it.
	id = te.create(map[string]any{"command": []string{"true"}, "volumes": []map[string]any{{"Dest": "/keep"}}})
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	if n := len(te.volumes("")); n != 2 {
		t.Fatalf("rm without -v left %d volumes", n)
	}
	for _, v := range te.volumes(`{"anonymous":["true"]}`) {
		te.Must(http.StatusNoContent, "DELETE", "/volumes/"+v.Name, nil)
	}
	te.create(map[string]any{"command": []string{"true"}, "volumes": []map[string]any{{"Dest": "/keep"}}})
	te.Must(http.StatusOK, "POST", "/containers/prune", nil)
	if got := volumeNames(te.volumes("")); !slices.Equal(got, []string{"shared"}) {
		t.Fatalf("volumes after container prune: %v", got)
	}

	// volumes_from shares another container's volumes, here read-only.
	src := te.create(map[string]any{"command": []string{"true"},
		"volumes": []map[string]any{{"Name": "shared", "Dest": "/data"}, {"Dest": "/anon"}}})
	code, out = te.run(map[string]any{"command": []string{"sh", "-c", "cat /data/f; ls /anon && touch /anon/x"},
		"volumes_from": []string{src + ":ro"}})
	if code == 0 || len(out) == 0 || out[0] != "shared" {
		t.Fatalf("volumes_from ro: %d %v", code, out)
	}
	code, out = te.run(map[string]any{"command": []string{"touch", "/anon/x"}, "volumes_from": []string{src}})
	if code != 0 {
		t.Fatalf("volumes_from rw: %d %v", code, out)
	}
	te.Must(http.StatusNotFound, "POST", "/containers/create", map[string]any{"image": "busybox", "volumes_from": []string{"nope"}})
	te.Must(http.StatusBadRequest, "POST", "/containers/create", map[string]any{"image": "busybox", "volumes_from": []string{src + ":ro,rw"}})
	te.Must(http.StatusOK, "DELETE", "/containers/"+src+"?v=true", nil)

	// Bad volume specs: 400 and nothing created.
	for _, vols := range []string{
		`[{"Name":"x","Dest":"relative"}]`,
		`[{"Name":"x","Dest":"/"}]`,
		`[{"Name":"bad/name","Dest":"/a"}]`,
		`[{"Name":"a","Dest":"/a"},{"Name":"b","Dest":"/a"}]`,
		`[{"Name":"x","Dest":"/a","Options":["bogus"]}]`,
	} {
		status, body := te.Do("POST", "/containers/create", `{"image":"busybox","volumes":`+vols+`}`)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "volumes") && !strings.Contains(string(body), "mounts") {
			t.Fatalf("volumes %s: %d %s", vols, status, body)
		}
	}
	if got := volumeNames(te.volumes("")); !slices.Equal(got, []string{"shared"}) {
		t.Fatalf("volumes after bad creates: %v", got)
	}
}

// TestVolumePruneRacesCreate prunes volumes while containers are created
// with new volumes: no container may lose a volume it was given.
func TestVolumePruneRacesCreate(t *testing.T) {
	te := startEngine(t)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
				if resp, err := te.Client.Post(te.URL+"/volumes/prune", "", nil); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	var ids []string
	for i := 0; i < 15; i++ {
		ids = append(ids, te.create(map[string]any{"command": []string{"true"},
			"volumes": []map[string]any{{"Dest": "/a"}, {"Name": fmt.Sprintf("named%d", i), "Dest": "/b"}}}))
	}
	close(done)
	<-stopped
	for _, id := range ids {
		var insp struct {
			Mounts []struct{ Name, Source string }
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &insp)
		if len(insp.Mounts) != 2 {
			t.Fatalf("mounts %+v", insp.Mounts)
		}
		for _, m := range insp.Mounts {
			if _, err := os.Stat(m.Source); err != nil {
				t.Fatalf("container %s lost volume %s: %v", id, m.Name, err)
			}
			te.Must(http.StatusOK, "GET", "/volumes/"+m.Name+"/json", nil)
		}
	}
}

// TestVolumeListFilterAlternatives is the table of the volume list's and
// prune's filter rules as Podman applies them: several values of one
// filter match any of them (label and label! values must all hold);
// different filters must all match. Requests go through the /v4.3.1 path
// podman 4.3.1 uses.
func TestVolumeListFilterAlternatives(t *testing.T) {
	te := startEngine(t)
	for name, labels := range map[string]map[string]string{
		"va": {"tier": "db", "env": "prod"},
		"vb": {"tier": "web", "env": "prod"},
		"vc": {"tier": "web"},
	} {
		te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": name, "Labels": labels})
	}
	id := te.create(map[string]any{"command": []string{"true"}, "volumes": []map[string]any{{"Name": "va", "Dest": "/data"}}})
	future := time.Now().Add(time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		filters string
		want    string
	}{
		{`{"name":["va","vb"]}`, "va,vb"},
		{`{"name":["nope","vc"]}`, "vc"},
		{`{"name":["^v[ab]$"]}`, "va,vb"},
		{`{"driver":["nfs","local"]}`, "va,vb,vc"},
		{`{"driver":["nfs"]}`, ""},
		{`{"scope":["local"]}`, "va,vb,vc"},
		{`{"scope":["global"]}`, ""},
		{`{"label":["tier=web"]}`, "vb,vc"},
		{`{"label":["tier=web","env"]}`, "vb"},
		{`{"label":["env=prod"]}`, "va,vb"},
		{`{"label!":["env"]}`, "vc"},
		{`{"label!":["env","tier=db"]}`, "vc"},
		{`{"label!":["tier=db"],"label":["env"]}`, "vb"},
		{`{"dangling":["true"]}`, "vb,vc"},
		{`{"dangling":["false"]}`, "va"},
		{`{"dangling":["true","false"]}`, "va,vb,vc"},
		{`{"until":["1h"]}`, ""},
		{`{"until":["1h","` + future + `"]}`, "va,vb,vc"},
		{`{"name":["va","vb"],"dangling":["true"]}`, "vb"},
		{`{"name":["va","vc"],"label":["env"],"driver":["local"]}`, "va"},
	} {
		if got := strings.Join(volumeNames(te.volumes(tc.filters)), ","); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.filters, got, tc.want)
		}
	}
	var reports []struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/volumes/prune?filters="+url.QueryEscape(`{"label":["tier=web","env"]}`), nil), &reports)
	if len(reports) != 1 || reports[0].ID != "vb" {
		t.Fatalf("prune with two labels: %+v", reports)
	}
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/volumes/prune?filters="+url.QueryEscape(`{"until":["1h","`+future+`"],"label!":["tier=db"]}`), nil), &reports)
	if len(reports) != 1 || reports[0].ID != "vc" {
		t.Fatalf("prune with until alternatives and label!: %+v", reports)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
}

// TestVolumeExportImport: export answers the volume's content as a tar;
// import merges a tar into it (the tar wins); a tar whose entries leave the
// volume, a malformed or truncated tar is a 400 and imports nothing.
func TestVolumeExportImport(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "data"})
	data := filepath.Join(te.Root, "volumes", "data", "_data")
	os.WriteFile(filepath.Join(data, "keep"), []byte("kept"), 0o600)
	os.WriteFile(filepath.Join(data, "old"), []byte("old"), 0o644)

	te.Must(http.StatusNoContent, "POST", "/volumes/data/import", bytes.NewReader(tartest.Of(t,
		"sub/", "", "sub/new", "new-content", "/old", "replaced")))
	for file, want := range map[string]string{"keep": "kept", "old": "replaced", "sub/new": "new-content"} {
		if got, err := os.ReadFile(filepath.Join(data, file)); err != nil || string(got) != want {
			t.Fatalf("%s after import: %q %v", file, got, err)
		}
	}
	if code, out := te.run(map[string]any{"command": []string{"cat", "/v/sub/new"}, "volumes": []map[string]any{{"Name": "data", "Dest": "/v"}}}); code != 0 || !strings.Contains(strings.Join(out, ""), "new-content") {
		t.Fatalf("container reading the import: %d %q", code, out)
	}

	status, body := te.Do("GET", "/volumes/data/export", nil)
	if status != http.StatusOK {
		t.Fatalf("export: %d %s", status, body)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(body))
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		content, _ := io.ReadAll(tr)
		got[strings.TrimPrefix(hdr.Name, "./")] = string(content)
	}
	if got["keep"] != "kept" || got["old"] != "replaced" || got["sub/new"] != "new-content" {
		t.Fatalf("exported entries: %v", got)
	}

	before, _ := os.ReadDir(data)
	for name, bad := range map[string][]byte{
		"traversal":      tartest.Of(t, "fine", "x", "../escaped", "evil"),
		"deep traversal": tartest.Of(t, "a/../../escaped", "evil"),
		"not a tar":      []byte("this is not a tar archive, not at all, and it goes on for a while........................................................................................................................................................................................................................................................................................................................................................................................................................................................................................."),
		"truncated":      tartest.Of(t, "big", strings.Repeat("x", 4096))[:1024],
		"empty":          nil,
	} {
		status, body := te.Do("POST", "/volumes/data/import", bytes.NewReader(bad))
		if status != http.StatusBadRequest || !strings.Contains(string(body), "body") {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	after, _ := os.ReadDir(data)
	if len(after) != len(before) {
		t.Fatalf("a refused import left files: %v -> %v", before, after)
	}
	if _, err := os.Stat(filepath.Join(te.Root, "volumes", "escaped")); err == nil {
		t.Fatal("a traversal entry was written outside the volume")
	}
	if staged, _ := filepath.Glob(filepath.Join(te.Root, "volumes", "data", ".import-*")); len(staged) != 0 {
		t.Fatalf("staging left: %v", staged)
	}
	te.Must(http.StatusNotFound, "GET", "/volumes/nope/export", nil)
	te.Must(http.StatusNotFound, "POST", "/volumes/nope/import", bytes.NewReader(tartest.Of(t, "f", "x")))
}

// TestVolumeMountOptions: a tmpfs volume (type=tmpfs, o=size=...,nodev,
// noexec, UID) and a bind volume (o=bind, device=) are mounted while a
// container uses them and unmounted after; removing a bind volume leaves the
// host directory's content; options the driver cannot honour are a 400.
func TestVolumeMountOptions(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "tmp", "Options": map[string]string{"type": "tmpfs", "o": "size=2m,nodev,noexec", "UID": "1000"}})
	data := filepath.Join(te.Root, "volumes", "tmp", "_data")
	code, out := te.run(map[string]any{"command": []string{"sh", "-c", "grep ' /data ' /proc/mounts; stat -c %u /data; echo x > /data/f && echo written"},
		"volumes": []map[string]any{{"Name": "tmp", "Dest": "/data"}}})
	all := strings.Join(out, "\n")
	if code != 0 || !strings.Contains(all, "tmpfs /data tmpfs rw,nodev,noexec") || !strings.Contains(all, "size=2048k") || !strings.Contains(all, "1000") || !strings.Contains(all, "written") {
		t.Fatalf("tmpfs volume in the container: %d %q", code, out)
	}
	if mountedAt(data) {
		t.Fatal("the tmpfs volume is still mounted after its container exited")
	}

	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "from-host"), []byte("hi"), 0o644)
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "bound", "Options": map[string]string{"type": "none", "o": "bind", "device": host}})
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "bound-ro", "Options": map[string]string{"o": "bind,ro", "device": host}})
	code, out = te.run(map[string]any{"command": []string{"sh", "-c", "cat /data/from-host; echo; echo c > /data/from-ctr; (touch /ro/x) 2>/dev/null || echo ro-refused"},
		"volumes": []map[string]any{{"Name": "bound", "Dest": "/data"}, {"Name": "bound-ro", "Dest": "/ro"}}})
	if code != 0 || !strings.Contains(strings.Join(out, " "), "hi") || !strings.Contains(strings.Join(out, " "), "ro-refused") {
		t.Fatalf("bind volumes in the container: %d %q", code, out)
	}
	if got, err := os.ReadFile(filepath.Join(host, "from-ctr")); err != nil || string(got) != "c\n" {
		t.Fatalf("the container's write on the host: %q %v", got, err)
	}
	enginetest.RemoveAll(te.Do)
	te.Must(http.StatusNoContent, "DELETE", "/volumes/bound", nil)
	te.Must(http.StatusNoContent, "DELETE", "/volumes/bound-ro", nil)
	if entries, _ := os.ReadDir(host); len(entries) != 2 {
		t.Fatalf("removing the bind volumes touched the host directory: %v", entries)
	}

	for _, opts := range []map[string]string{
		{"type": "ext4", "device": "/dev/sda"},
		{"o": "size=1m"},
		{"type": "tmpfs", "o": "bind"},
		{"type": "tmpfs", "o": "uid"},
		{"o": "bind", "device": "relative"},
		{"o": "bind", "device": filepath.Join(host, "nope")},
		{"o": "bind,size=1m", "device": host},
		{"type": "tmpfs", "o": "mand"},
		{"colour": "red"},
	} {
		status, body := te.Do("POST", "/volumes/create", map[string]any{"Name": "bad", "Options": opts})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "Options") {
			t.Errorf("%v: %d %s", opts, status, body)
		}
	}
	if got := volumeNames(te.volumes(`{"name":["bad"]}`)); len(got) != 0 {
		t.Fatalf("a refused volume exists: %v", got)
	}
}

// mountedAt reports whether dir is a mount point of this process's view.
func mountedAt(dir string) bool {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestVolumeRemoveForceTimeout: podman volume rm -f --time 0 (timeout,
// not read before) kills the running containers that use the volume at
// once instead of waiting out their stop timeout; a timeout that is no
// number is a 400.
func TestVolumeRemoveForceTimeout(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sleep", "600"}, "volumes": []map[string]any{{"Name": "busyvol", "Dest": "/d"}}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.Must(http.StatusBadRequest, "DELETE", "/volumes/busyvol?force=true&timeout=soon", nil)
	start := time.Now()
	te.Must(http.StatusNoContent, "DELETE", "/volumes/busyvol?force=true&timeout=0", nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a forced removal with timeout 0 took %v (sleep ignores SIGTERM: the 10 s stop timeout was waited out)", took)
	}
	te.Must(http.StatusNotFound, "GET", "/containers/"+id+"/json", nil)
}
