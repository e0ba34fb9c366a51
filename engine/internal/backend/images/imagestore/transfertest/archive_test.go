package transfertest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/handlers"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// rootfs is a small rootfs tarball with one file.
func rootfs(t testing.TB) []byte {
	t.Helper()
	return tartest.Of(t, "etc/", "", "etc/motd", "imported\n")
}

func TestImportWithChanges(t *testing.T) {
	e := newEnv(t)
	opts := core.ImportOptions{
		Changes: []string{
			`CMD ["/bin/app", "--serve"]`, "ENTRYPOINT /entry", "ENV A=1 B=\"two words\"", "ENV LEGACY value here",
			"WORKDIR /srv", "LABEL team=berth tier=test", "EXPOSE 8080 53/udp", "USER nobody", "VOLUME /data",
			"STOPSIGNAL SIGTERM",
		},
		Message:   "first import",
		Reference: "imported:1",
	}
	id, err := e.transfer.Import(context.Background(), bytes.NewReader(rootfs(t)), opts)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	img, err := e.store.Lookup(context.Background(), "localhost/imported:1")
	if err != nil {
		t.Fatalf("imported image not named: %v", err)
	}
	if "sha256:"+img.ID != id {
		t.Errorf("import reported %s, stored %s", id, img.ID)
	}
	cfg := img.Config.Config
	want := map[string]any{
		"cmd":        []string{"/bin/app", "--serve"},
		"entrypoint": []string{"/bin/sh", "-c", "/entry"},
		"env":        []string{"A=1", "B=two words", "LEGACY=value here"},
		"workdir":    "/srv",
		"labels":     map[string]string{"team": "berth", "tier": "test"},
		"user":       "nobody",
		"stop":       "SIGTERM",
	}
	got := map[string]any{
		"cmd": cfg.Cmd, "entrypoint": cfg.Entrypoint, "env": cfg.Env, "workdir": cfg.WorkingDir,
		"labels": cfg.Labels, "user": cfg.User, "stop": cfg.StopSignal,
	}
	for k := range want {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s = %#v, want %#v", k, got[k], want[k])
		}
	}
	if _, ok := cfg.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v", cfg.ExposedPorts)
	}
	if _, ok := cfg.ExposedPorts["53/udp"]; !ok {
		t.Errorf("exposed ports %v", cfg.ExposedPorts)
	}
	if _, ok := cfg.Volumes["/data"]; !ok {
		t.Errorf("volumes %v", cfg.Volumes)
	}
	if h := img.Config.History; len(h) == 0 || h[len(h)-1].Comment != "first import" {
		t.Errorf("history %+v lacks the message", h)
	}

	// A gzip-compressed rootfs imports too.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(rootfs(t))
	zw.Close()
	if _, err := e.transfer.Import(context.Background(), &gz, core.ImportOptions{}); err != nil {
		t.Errorf("gzip import: %v", err)
	}
}

func TestImportRefusals(t *testing.T) {
	e := newEnv(t)
	good := rootfs(t)
	before := e.snapshot(t)
	cases := []struct {
		name string
		body []byte
		opts core.ImportOptions
	}{
		{"truncated", good[:700], core.ImportOptions{}},
		{"garbage", bytes.Repeat([]byte{0x42}, 4096), core.ImportOptions{}},
		{"unknown instruction", good, core.ImportOptions{Changes: []string{"RUN rm -rf /"}}},
		{"bad port", good, core.ImportOptions{Changes: []string{"EXPOSE 99999"}}},
		{"relative volume", good, core.ImportOptions{Changes: []string{"VOLUME data"}}},
		{"bad reference", good, core.ImportOptions{Reference: "Bad Name"}},
	}
	for _, c := range cases {
		_, err := e.transfer.Import(context.Background(), bytes.NewReader(c.body), c.opts)
		if !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", c.name, err)
		}
	}
	if _, err := e.transfer.ImportURL(context.Background(), "file:///etc/passwd", core.ImportOptions{}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("file URL: %v", err)
	}
	if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
		t.Errorf("refused imports changed the store: %s", after)
	}
}

func TestImportFromURL(t *testing.T) {
	e := newEnv(t)
	body := rootfs(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/rootfs.tar" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	id, err := e.transfer.ImportURL(context.Background(), srv.URL+"/rootfs.tar", core.ImportOptions{Reference: "localhost/fromurl:1"})
	if err != nil {
		t.Fatalf("import from URL: %v", err)
	}
	if img, err := e.store.Lookup(context.Background(), "localhost/fromurl:1"); err != nil || "sha256:"+img.ID != id {
		t.Fatalf("lookup: %v", err)
	}
	if _, err := e.transfer.ImportURL(context.Background(), srv.URL+"/missing", core.ImportOptions{}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("404 URL: %v", err)
	}
}

// TestExportFormatsReload: every export format holds the image, and the
// archives load back (into a second store) as the same image.
func TestExportFormatsReload(t *testing.T) {
	e := newEnv(t)
	id := e.load(t, "localhost/exported:1")
	e.load(t, "localhost/second:1")
	for _, format := range []string{core.FormatDockerArchive, core.FormatOCIArchive} {
		t.Run(format, func(t *testing.T) {
			data := exportBytes(t, e.transfer, []string{"exported:1"}, core.ExportOptions{Format: format})
			dst := newEnv(t)
			names, err := dst.transfer.Load(context.Background(), bytes.NewReader(data), core.LoadOptions{})
			if err != nil {
				t.Fatalf("reload: %v", err)
			}
			if !reflect.DeepEqual(names, []string{"localhost/exported:1"}) {
				t.Errorf("names = %v", names)
			}
			img, err := dst.store.Lookup(context.Background(), "localhost/exported:1")
			if err != nil {
				t.Fatal(err)
			}
			if format == core.FormatDockerArchive && img.ID != id {
				t.Errorf("reloaded ID %s, want %s", img.ID, id)
			}
		})
	}
	// Several images: one docker-archive; by ID: untagged in the archive.
	data := exportBytes(t, e.transfer, []string{"localhost/exported:1", "second:1"}, core.ExportOptions{Format: core.FormatDockerArchive})
	dst := newEnv(t)
	names, err := dst.transfer.Load(context.Background(), bytes.NewReader(data), core.LoadOptions{})
	if err != nil || !slices.Equal(names, []string{"localhost/exported:1", "localhost/second:1"}) {
		t.Errorf("multi-image export reloaded as %v, %v", names, err)
	}
	data = exportBytes(t, e.transfer, []string{id[:12]}, core.ExportOptions{Format: core.FormatDockerArchive})
	names, err = newEnv(t).transfer.Load(context.Background(), bytes.NewReader(data), core.LoadOptions{})
	if err != nil || !slices.Equal(names, []string{"sha256:" + id}) {
		t.Errorf("export by ID reloaded as %v, %v", names, err)
	}
	for _, format := range []string{core.FormatOCIDir, core.FormatDockerDir} {
		data := exportBytes(t, e.transfer, []string{"exported:1"}, core.ExportOptions{Format: format})
		entries := tarNames(t, data)
		want := "manifest.json"
		if format == core.FormatOCIDir {
			want = "index.json"
		}
		if !slices.Contains(entries, want) {
			t.Errorf("%s export lacks %s: %v", format, want, entries)
		}
	}
}

func TestExportRefusals(t *testing.T) {
	e := newEnv(t)
	e.load(t, "localhost/one:1")
	e.load(t, "localhost/two:1")
	cases := []struct {
		names []string
		opts  core.ExportOptions
		want  error
	}{
		{[]string{"localhost/missing:1"}, core.ExportOptions{Format: core.FormatDockerArchive}, core.ErrNoSuchImage},
		{[]string{"one:1", "two:1"}, core.ExportOptions{Format: core.FormatOCIArchive}, core.ErrInvalidArgument},
		{[]string{"one:1"}, core.ExportOptions{Format: "zip"}, core.ErrInvalidArgument},
		{nil, core.ExportOptions{}, core.ErrInvalidArgument},
	}
	for _, c := range cases {
		rc, err := e.transfer.Export(context.Background(), c.names, c.opts)
		if err == nil {
			rc.Close()
		}
		if !errors.Is(err, c.want) {
			t.Errorf("export %v %+v: %v, want %v", c.names, c.opts, err, c.want)
		}
	}
}

func TestScpToLocalNameAndToAnotherEngine(t *testing.T) {
	e := newEnv(t)
	id := e.load(t, "localhost/scp:1")
	got, err := e.transfer.Scp(context.Background(), "scp:1", "copy:2")
	if err != nil || got != "localhost/copy:2" {
		t.Fatalf("local scp: %q %v", got, err)
	}
	if img, err := e.store.Lookup(context.Background(), "localhost/copy:2"); err != nil || img.ID != id {
		t.Fatalf("local copy: %v", err)
	}

	other := newEnv(t)
	srv := other.server(t)
	got, err = e.transfer.Scp(context.Background(), "scp:1", "tcp://"+srv.Listener.Addr().String()+"::")
	if err != nil || got != "localhost/scp:1" {
		t.Fatalf("scp to engine: %q %v", got, err)
	}
	got, err = e.transfer.Scp(context.Background(), "scp:1", srv.URL+"::renamed:3")
	if err != nil || got != "localhost/renamed:3" {
		t.Fatalf("scp to engine with a name: %q %v", got, err)
	}
	for _, name := range []string{"localhost/scp:1", "localhost/renamed:3"} {
		if img, err := other.store.Lookup(context.Background(), name); err != nil || img.ID != id {
			t.Errorf("%s on the other engine: %v", name, err)
		}
	}

	// Podman serves its libpod routes only under a versioned prefix
	// (/v4.3.1/libpod/...; the bare /libpod/... is 404 there), so an scp
	// must reach an engine that answers only versioned paths.
	versioned := newEnv(t)
	podmanLike := versionedOnly(t, versioned)
	got, err = e.transfer.Scp(context.Background(), "scp:1", "tcp://"+podmanLike.Listener.Addr().String()+"::")
	if err != nil || got != "localhost/scp:1" {
		t.Fatalf("scp to an engine serving only versioned paths: %q %v", got, err)
	}
	if img, err := versioned.store.Lookup(context.Background(), "localhost/scp:1"); err != nil || img.ID != id {
		t.Errorf("localhost/scp:1 on the versioned-only engine: %v", err)
	}

	for _, dest := range []string{"", "ssh://host::", "tcp://::", "Bad Name"} {
		if _, err := e.transfer.Scp(context.Background(), "scp:1", dest); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("destination %q: %v, want invalid argument", dest, err)
		}
	}
	if _, err := e.transfer.Scp(context.Background(), "missing:1", "x:1"); !errors.Is(err, core.ErrNoSuchImage) {
		t.Errorf("unknown source: %v", err)
	}
	closed := "tcp://" + closedAddr(t) + "::"
	if _, err := e.transfer.Scp(context.Background(), "scp:1", closed); err == nil {
		t.Error("scp to a closed port succeeded")
	}
}

func exportBytes(t testing.TB, tr *imagestore.Transfer, names []string, opts core.ExportOptions) []byte {
	t.Helper()
	rc, err := tr.Export(context.Background(), names, opts)
	if err != nil {
		t.Fatalf("export %v as %s: %v", names, opts.Format, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func tarNames(t testing.TB, data []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("not a tar: %v", err)
		}
		names = append(names, hdr.Name)
	}
}

// versionedOnly serves e through the engine's handlers but, as a Podman
// service does, answers 404 to libpod paths without a /v{version} prefix.
func versionedOnly(t testing.TB, e *env) *httptest.Server {
	t.Helper()
	h := handlers.NewServer(nil, handlers.Deps{Images: e.store, Transfer: e.transfer}, handlers.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/libpod/") {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}
