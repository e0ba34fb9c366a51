package containers_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestArtifactVolumes: artifact_volumes (Podman 5's --mount type=artifact)
// bind an artifact's files read-only: an artifact of one file at the
// destination itself, several as DEST/TITLE (or NAME-i with a name), a
// title selecting one; a container user that is not root reads them; a
// write fails. An artifact the store lacks, a title and a digest together,
// a relative destination, a name with a slash, or several files onto a file
// of the image is refused at create with a 4xx naming it.
func TestArtifactVolumes(t *testing.T) {
	te := startEngine(t)
	add := func(name, file, content string, appendFile bool) {
		t.Helper()
		q := "/artifacts/add?name=" + name + "&fileName=" + file
		if appendFile {
			q += "&append=true"
		}
		if status, body := te.Raw("POST", q, "application/octet-stream", strings.NewReader(content)); status != http.StatusCreated && status != http.StatusOK {
			t.Fatalf("add %s to %s: %d %s", file, name, status, body)
		}
	}
	add("localhost/t/one:1", "model.bin", "weights\n", false)
	add("localhost/t/two:1", "a.txt", "A\n", false)
	add("localhost/t/two:1", "b.txt", "B\n", true)
	mount := func(extra map[string]any) []map[string]any {
		m := map[string]any{"source": "localhost/t/two:1", "destination": "/art"}
		for k, v := range extra {
			m[k] = v
		}
		return []map[string]any{m}
	}
	for _, c := range []struct {
		mounts []map[string]any
		cmd    string
		want   string
	}{
		{mount(map[string]any{"source": "localhost/t/one:1", "destination": "/data/model.bin"}), "cat /data/model.bin", "weights"},
		{mount(nil), "ls /art; cat /art/a.txt /art/b.txt", "a.txt|b.txt|A|B"},
		{mount(map[string]any{"name": "f"}), "ls /art", "f-0|f-1"},
		{mount(map[string]any{"title": "b.txt", "destination": "/etc"}), "cat /etc/b.txt", "B"},
		{mount(map[string]any{"title": "b.txt"}), "cat /art", "B"},
		{mount(nil), "echo x > /art/a.txt || echo read-only", "read-only"},
	} {
		code, lines := te.run(map[string]any{"artifact_volumes": c.mounts, "user": "1000", "command": []string{"sh", "-c", c.cmd}})
		if got := strings.Join(lines, "|"); code != 0 || !strings.Contains(got, c.want) {
			t.Errorf("%v, %s: exit %d %q, want %q", c.mounts, c.cmd, code, got, c.want)
		}
	}

	for want, mounts := range map[string][]map[string]any{
		"artifact does not exist":           mount(map[string]any{"source": "localhost/t/none:1"}),
		"artifact_volumes[0]":               mount(map[string]any{"title": "a.txt", "digest": "sha256:00"}),
		"artifact_volumes[0].destination":   mount(map[string]any{"destination": "rel"}),
		"artifact_volumes[0].name":          mount(map[string]any{"name": "../x"}),
		"has no file titled":                mount(map[string]any{"title": "c.txt"}),
		"has 2 files and /bin/sh is a file": mount(map[string]any{"destination": "/bin/sh"}),
		"artifact_volumes[0].source":        mount(map[string]any{"source": ""}),
	} {
		status, body := te.Do("POST", "/containers/create", map[string]any{"image": "busybox", "artifact_volumes": mounts})
		if status/100 != 4 || !strings.Contains(string(body), want) {
			t.Errorf("create with %v: %d %s, want a 4xx with %q", mounts, status, body, want)
		}
	}
}
