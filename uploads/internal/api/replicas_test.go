package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/internal/api"
	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/berth-project/berth/uploads/internal/store/storetest"
	"github.com/google/uuid"
)

// replicas starts n servers that share one database and one data directory, each with
// its own store (its own connections), as n replicas of the service do.
func replicas(t *testing.T, open storetest.ReplicaOpener, n int, limits api.Limits) []*env {
	t.Helper()
	dataDir := t.TempDir()
	var out []*env
	for _, st := range open(t, dataDir, n) {
		out = append(out, newEnv(t, envOpts{st: st, dataDir: dataDir, limits: limits}))
	}
	return out
}

// checkBooks fails unless the books of upload id (bytes and file count) equal its tree.
func checkBooks(t *testing.T, e *env, id string) store.Upload {
	t.Helper()
	tree, err := files.New(e.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	disk, err := tree.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	u, err := e.store.Get(context.Background(), uuid.MustParse(id))
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes != disk.Bytes || u.Files != disk.Files {
		t.Fatalf("upload %s: books say %d bytes in %d files, the disk holds %d bytes in %d files", id, u.Bytes, u.Files, disk.Bytes, disk.Files)
	}
	return u
}

// Three replicas overwrite, create and delete the same paths at once: the books equal
// the disk afterwards, and the limits hold exactly (never more on disk than allowed, and
// a limit is never reached by phantom files).
func TestReplicasKeepTheBooks(t *testing.T) {
	for name, open := range storetest.ReplicaBackends(t) {
		t.Run(name, func(t *testing.T) {
			const maxBytes = 8 << 10
			rs := replicas(t, open, 3, api.Limits{MaxUploadSize: maxBytes, MaxFiles: 4})
			id := rs[0].create()
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			for round := range 12 {
				for i, e := range rs {
					wg.Add(2)
					go func() {
						defer wg.Done()
						// 3 KiB or 5 KiB over one path: any two together would pass 8 KiB if
						// each replica booked its own view.
						size := (3 + 2*((round+i)%2)) << 10
						r := e.put(id, "same", strings.Repeat("x", size))
						mu.Lock()
						codes[r.status]++
						mu.Unlock()
					}()
					go func() {
						defer wg.Done()
						p := fmt.Sprintf("dir%d/f", i)
						r := e.put(id, p, "12345678")
						if r.status == http.StatusNoContent {
							e.do("DELETE", "/v1/uploads/"+id+"/files/dir"+fmt.Sprint(i), nil)
						}
					}()
				}
				wg.Wait()
				u := checkBooks(t, rs[0], id)
				if u.Bytes > maxBytes || u.Files > 4 {
					t.Fatalf("round %d: %d bytes in %d files passed the limits", round, u.Bytes, u.Files)
				}
			}
			for code := range codes {
				if code != http.StatusNoContent && code != http.StatusRequestEntityTooLarge {
					t.Fatalf("overwrites answered %v", codes)
				}
			}
			// Whatever is left, the file limit is reached exactly: first remove all, then
			// four files fit and the fifth does not.
			for _, p := range []string{"same", "dir0", "dir1", "dir2"} {
				rs[1].do("DELETE", "/v1/uploads/"+id+"/files/"+p, nil)
			}
			checkBooks(t, rs[0], id)
			for i := range 4 {
				rs[i%3].mustPut(id, fmt.Sprintf("n%d", i), "1")
			}
			rs[2].put(id, "n4", "1").problem(t, http.StatusRequestEntityTooLarge)
			checkBooks(t, rs[0], id)
		})
	}
}

// A PUT on one replica racing markForProcessing on another is either refused with 409 or
// in the tree that processing sees (the tree as it is when the mark returns, which never
// changes after).
func TestReplicasPutRacingMark(t *testing.T) {
	for name, open := range storetest.ReplicaBackends(t) {
		t.Run(name, func(t *testing.T) {
			rs := replicas(t, open, 2, api.Limits{})
			accepted, refused := 0, 0
			for round := range 30 {
				id := rs[0].create()
				rs[0].mustPut(id, "f", "orig")
				body := fmt.Sprintf("round-%d", round)
				done := make(chan resp, 1)
				go func() { done <- rs[round%2].put(id, "f", body) }()
				if round%3 != 0 {
					time.Sleep(time.Duration(round%5) * time.Millisecond)
				}
				if r := rs[(round+1)%2].do("POST", "/v1/uploads/"+id+"/markForProcessing", nil); r.status != http.StatusAccepted {
					t.Fatalf("mark: %d %s", r.status, r.body)
				}
				seen, _ := os.ReadFile(filepath.Join(rs[0].dataDir, "uploads", id, "files", "f"))
				r := <-done
				switch r.status {
				case http.StatusNoContent:
					accepted++
					if string(seen) != body {
						t.Fatalf("round %d: PUT accepted, but processing sees %q", round, seen)
					}
				case http.StatusConflict:
					refused++
				default:
					t.Fatalf("round %d: PUT answered %d %s", round, r.status, r.body)
				}
				if now, _ := os.ReadFile(filepath.Join(rs[0].dataDir, "uploads", id, "files", "f")); string(now) != string(seen) {
					t.Fatalf("round %d: the tree changed after the mark: %q then %q", round, seen, now)
				}
			}
			t.Logf("%d PUTs accepted before the mark, %d refused", accepted, refused)
		})
	}
}

// DELETE of an upload on one replica while PUTs stream into it on another always answers
// 204; the PUTs answer 204 (before), 404 or 409, never 500; afterwards neither the row nor
// any file of the tree is left. One PUT is held halfway so that its temporary exists
// while the tree is removed.
func TestReplicasDeleteRacingPuts(t *testing.T) {
	for name, open := range storetest.ReplicaBackends(t) {
		t.Run(name, func(t *testing.T) {
			rs := replicas(t, open, 2, api.Limits{})
			for round := range 10 {
				id := rs[0].create()
				for i := range 20 {
					rs[0].mustPut(id, fmt.Sprintf("d/%d", i), "x")
				}
				pr, pw := io.Pipe()
				req, _ := http.NewRequest("PUT", rs[1].base+"/v1/uploads/"+id+"/files/held", pr)
				req.Header.Set("Content-Type", "application/octet-stream")
				held := make(chan int, 1)
				go func() {
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						held <- -1
						return
					}
					res.Body.Close()
					held <- res.StatusCode
				}()
				if _, err := pw.Write([]byte("first half ")); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				codes := make(chan int, 40)
				for i := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range 5 {
							codes <- rs[1].put(id, fmt.Sprintf("p%d/%d", i, j), "data").status
						}
					}()
				}
				time.Sleep(time.Duration(round) * time.Millisecond)
				if r := rs[0].do("DELETE", "/v1/uploads/"+id, nil); r.status != http.StatusNoContent {
					t.Fatalf("round %d: DELETE answered %d %s", round, r.status, r.body)
				}
				_, _ = pw.Write([]byte("second half"))
				pw.Close()
				wg.Wait()
				close(codes)
				for c := range codes {
					if c != http.StatusNoContent && c != http.StatusNotFound && c != http.StatusConflict {
						t.Fatalf("round %d: a racing PUT answered %d", round, c)
					}
				}
				if c := <-held; c != http.StatusNotFound {
					t.Fatalf("round %d: the held PUT answered %d, want 404", round, c)
				}
				if left := rs[0].treeContents(id); len(left) != 0 {
					t.Fatalf("round %d: the deleted upload left %v", round, left)
				}
				if _, err := os.Stat(filepath.Join(rs[0].dataDir, "uploads", id)); !os.IsNotExist(err) {
					t.Fatalf("round %d: the tree's directory is still there: %v", round, err)
				}
				rows, err := rs[0].store.Lookup(context.Background(), []uuid.UUID{uuid.MustParse(id)})
				if err != nil || len(rows) != 0 {
					t.Fatalf("round %d: rows left %v %v", round, rows, err)
				}
			}
		})
	}
}
