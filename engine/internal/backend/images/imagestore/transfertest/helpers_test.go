package transfertest

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/handlers"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// env is one store with its transfer backend.
type env struct {
	store    *imagestore.Store
	transfer *imagestore.Transfer
	root     string
}

// newEnv opens a fresh store under a temporary root.
func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, imagestore.TransferOptions{})
}

// newEnvWith opens a fresh store whose transfer backend has opts.
func newEnvWith(t testing.TB, opts imagestore.TransferOptions) *env {
	t.Helper()
	requireBusybox(t)
	root := t.TempDir()
	store, err := imagestore.Open(imagestore.Options{Root: filepath.Join(root, "root"), RunRoot: filepath.Join(root, "run")})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Shutdown() })
	transfer, err := imagestore.NewTransfer(store, opts)
	if err != nil {
		t.Fatalf("new transfer: %v", err)
	}
	return &env{store: store, transfer: transfer, root: root}
}

// server serves the env through the engine's real handlers.
func (e *env) server(t testing.TB) *httptest.Server {
	t.Helper()
	h := handlers.NewServer(nil, handlers.Deps{Images: e.store, Transfer: e.transfer}, handlers.Config{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func requireBusybox(t testing.TB) {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	need.All(t, "image transfer tests (busybox-static)", testimage.BusyboxPath)
}

// archive builds an archive of images in format.
func archive(t testing.TB, format testimage.Format, images ...testimage.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := testimage.Write(&buf, format, images...); err != nil {
		t.Fatalf("building archive: %v", err)
	}
	return buf.Bytes()
}

// load loads a one-image busybox archive named name into e.
func (e *env) load(t testing.TB, name string) string {
	t.Helper()
	names, err := e.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, testimage.Busybox(name, "true"))), core.LoadOptions{})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	img, err := e.store.Lookup(context.Background(), names[0])
	if err != nil {
		t.Fatalf("lookup %s: %v", names[0], err)
	}
	return img.ID
}

// snapshot is what a user sees of the store: images with their names, and layers.
type snapshot struct {
	Images []string
	Layers []string
}

func (e *env) snapshot(t testing.TB) snapshot {
	t.Helper()
	return storeSnapshot(t, e.store.Storage())
}

func storeSnapshot(t testing.TB, st storage.Store) snapshot {
	t.Helper()
	images, err := st.Images()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := st.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot
	for _, img := range images {
		names := append([]string(nil), img.Names...)
		sort.Strings(names)
		s.Images = append(s.Images, img.ID+"="+strings.Join(names, ","))
	}
	for _, l := range layers {
		s.Layers = append(s.Layers, l.ID)
	}
	sort.Strings(s.Images)
	sort.Strings(s.Layers)
	return s
}

func (s snapshot) String() string {
	return "images " + strings.Join(s.Images, " ") + "; layers " + strings.Join(s.Layers, " ")
}

// checkStore fails when containers/storage finds damage.
func checkStore(t testing.TB, st storage.Store) {
	t.Helper()
	report, err := st.Check(&storage.CheckOptions{LayerDigests: true, LayerData: true, ImageData: true})
	if err != nil {
		t.Fatalf("store check: %v", err)
	}
	if len(report.Layers)+len(report.Images)+len(report.Containers) > 0 {
		t.Fatalf("store check found damage: layers %v images %v containers %v", report.Layers, report.Images, report.Containers)
	}
}

func boolPtr(b bool) *bool { return &b }

// closedAddr is a 127.0.0.1 address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	return registrytest.ClosedAddr(t)
}
