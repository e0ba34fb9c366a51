package deploy

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/guard"
	"github.com/berth-project/berth/uploads/internal/processor"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/berth-project/berth/uploads/internal/store/storetest"
)

// A worker with the engine deployer processes a whole upload against a fake engine, on
// every store: the engine sees the archive, then the units by type, then the YAML; the
// refused unit and YAML get one error entry each with the engine's message, the file a
// unit references none, and the other files still deploy.
func TestWorkerDeploysUpload(t *testing.T) {
	for name, open := range storetest.Backends(t) {
		t.Run(name, func(t *testing.T) {
			engine := newRecordingEngine(t, map[string]answer{
				"POST /images/load": {200, `{"Names":["localhost/app:latest"]}`},
				"POST /quadlets":    {200, `{"InstalledQuadlets":{"x":"y"},"QuadletErrors":{}}`},
				"POST /kube/play":   {200, `{"Pods":[{"ID":"p","Containers":["c"]}]}`},
			})
			refuseUnit, refuseYAML := "units/bad.container", "k8s/bad.yaml"
			engine.refuse = func(r recorded) *answer {
				switch {
				case r.path == "/quadlets" && strings.Contains(string(r.body), "Imagee"):
					return &answer{400, `{"cause":"unsupported key","message":"bad.container line 2: [Container] key Imagee: unsupported key in a .container unit","response":400}`}
				case r.path == "/kube/play" && strings.Contains(string(r.body), "kind: Nonsense"):
					return &answer{400, `{"cause":"unknown kind","message":"document 1: kind Nonsense: not supported","response":400}`}
				}
				return nil
			}
			tree, err := files.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			st := open(t)
			ctx := context.Background()
			u, err := st.Create(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id := u.ID.String()
			if err := tree.Create(id); err != nil {
				t.Fatal(err)
			}
			for rel, content := range map[string]string{
				"a.container":    "[Container]\nImage=localhost/app:latest\nNetwork=n.network\n",
				"n.network":      "[Network]\n",
				"web.kube":       "[Kube]\nYaml=web.yaml\n",
				"web.yaml":       "kind: Pod\n",
				"k8s/app.yml":    "kind: Pod\n",
				refuseYAML:       "kind: Nonsense\n",
				refuseUnit:       "[Container]\nImagee=x\n",
				"z/app.tar":      "archive",
				"notes/junk.txt": "x",
			} {
				if _, err := tree.Put(id, rel, strings.NewReader(content), int64(len(content)), 1<<20, guard.New(ctx, st, u.ID, files.Limits{})); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.MarkForProcessing(ctx, u.ID); err != nil {
				t.Fatal(err)
			}
			w := processor.New(quietLogger(), st, tree, New(clientFor(t, engine.srv.URL), quietLogger(), nil), processor.Config{PollInterval: 10 * time.Millisecond})
			runCtx, cancel := context.WithCancel(ctx)
			stopped := make(chan struct{})
			go func() { defer close(stopped); _ = w.Run(runCtx) }()
			defer func() { cancel(); <-stopped }()

			deadline := time.Now().Add(10 * time.Second)
			for u, _ = st.Get(ctx, u.ID); u.Status != store.StatusDone; u, _ = st.Get(ctx, u.ID) {
				if time.Now().After(deadline) {
					t.Fatalf("upload not done: %+v", u)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if *u.FilesTotal != 9 || u.FilesProcessed != 9 || u.Errors != 3 || u.Images != 1 {
				t.Errorf("done upload = %+v", u)
			}
			var calls []string
			for _, r := range engine.requests() {
				what := r.path
				if r.path == "/quadlets" {
					what += ":" + firstTarEntry(t, r.body)
				}
				calls = append(calls, what)
			}
			want := "/images/load,/quadlets:n.network,/quadlets:a.container,/quadlets:bad.container,/quadlets:web.kube,/kube/play,/kube/play"
			if got := strings.Join(calls, ","); got != want {
				t.Errorf("engine calls\n got %s\nwant %s", got, want)
			}
			errs, _, err := st.Errors(ctx, u.ID, 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			wantErrs := []store.FileError{
				{File: refuseUnit, Message: "quadlet unit refused by the engine (400): bad.container line 2: [Container] key Imagee: unsupported key in a .container unit"},
				{File: refuseYAML, Message: "kube YAML refused by the engine (400): document 1: kind Nonsense: not supported"},
				{File: "notes/junk.txt", Message: "unsupported file type"},
			}
			if fmt.Sprint(errs) != fmt.Sprint(wantErrs) {
				t.Errorf("errors\n got %v\nwant %v", errs, wantErrs)
			}
		})
	}
}

// firstTarEntry names the first entry of a tar archive: the unit of an install.
func firstTarEntry(t *testing.T, data []byte) string {
	t.Helper()
	hdr, err := tar.NewReader(bytes.NewReader(data)).Next()
	if err != nil {
		t.Fatalf("reading the archive sent: %v", err)
	}
	return hdr.Name
}
