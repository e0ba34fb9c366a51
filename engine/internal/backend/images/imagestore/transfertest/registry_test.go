package transfertest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/testimage"
)

func TestPushThenPullRoundTrip(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	src := newEnv(t)
	id := src.load(t, "localhost/roundtrip:1")
	ref := reg.Host + "/team/roundtrip:1"

	var progress bytes.Buffer
	if _, err := src.transfer.Push(context.Background(), "localhost/roundtrip:1", core.PushOptions{Destination: ref, TLSVerify: boolPtr(false), Progress: &progress}); err != nil {
		t.Fatalf("push: %v", err)
	}
	if !strings.Contains(progress.String(), "Writing manifest") {
		t.Errorf("push progress lacks the manifest step: %q", progress.String())
	}

	dst := newEnv(t)
	progress.Reset()
	ids, err := dst.transfer.Pull(context.Background(), core.PullOptions{Reference: ref, TLSVerify: boolPtr(false), Progress: &progress})
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if !reflect.DeepEqual(ids, []string{id}) {
		t.Errorf("pulled %v, want the pushed image %s", ids, id)
	}
	if !strings.HasPrefix(progress.String(), "Trying to pull "+ref) || !strings.Contains(progress.String(), "Copying blob") {
		t.Errorf("pull progress = %q", progress.String())
	}
	img, err := dst.store.Lookup(context.Background(), ref)
	if err != nil {
		t.Fatalf("pulled image not found by its name: %v", err)
	}
	if len(img.RepoDigests) == 0 {
		t.Errorf("pulled image has no repo digest")
	}
	checkStore(t, dst.store.Storage())

	// docker:// is the registry transport, accepted like a bare reference.
	if _, err := dst.transfer.Pull(context.Background(), core.PullOptions{Reference: "docker://" + ref, TLSVerify: boolPtr(false)}); err != nil {
		t.Errorf("pull docker://: %v", err)
	}
}

func TestPullPolicies(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	src := newEnv(t)
	src.load(t, "localhost/policy:1")
	ref := reg.Host + "/policy:1"
	if _, err := src.transfer.Push(context.Background(), "localhost/policy:1", core.PushOptions{Destination: ref, TLSVerify: boolPtr(false)}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	pull := func(policy core.PullPolicy) ([]string, string, error) {
		var progress bytes.Buffer
		ids, err := e.transfer.Pull(context.Background(), core.PullOptions{Reference: ref, Policy: policy, TLSVerify: boolPtr(false), Progress: &progress})
		return ids, progress.String(), err
	}
	if _, _, err := pull(core.PullNever); !errors.Is(err, core.ErrNoSuchImage) {
		t.Fatalf("policy never without the image: %v, want no such image", err)
	}
	ids, out, err := pull(core.PullMissing)
	if err != nil || len(ids) != 1 || out == "" {
		t.Fatalf("policy missing, first time: %v %q %v", ids, out, err)
	}
	for _, policy := range []core.PullPolicy{core.PullMissing, core.PullNever, core.PullNewer} {
		again, out, err := pull(policy)
		if err != nil || !reflect.DeepEqual(again, ids) {
			t.Errorf("policy %s with the image local: %v %v", policy, again, err)
		}
		if out != "" {
			t.Errorf("policy %s contacted the registry although the image is current: %q", policy, out)
		}
	}
	again, out, err := pull(core.PullAlways)
	if err != nil || !reflect.DeepEqual(again, ids) || out == "" {
		t.Errorf("policy always: %v %q %v", again, out, err)
	}
}

func TestPullRefusals(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	e := newEnv(t)
	cases := []struct {
		ref  string
		want error
	}{
		{"docker-archive:/tmp/x.tar", core.ErrInvalidArgument},
		{"oci:/tmp/layout:tag", core.ErrInvalidArgument},
		{"oci-archive:/tmp/x.tar", core.ErrInvalidArgument},
		{"dir:/tmp/x", core.ErrInvalidArgument},
		{"containers-storage:busybox", core.ErrInvalidArgument},
		{"docker-daemon:busybox:latest", core.ErrInvalidArgument},
		{"UPPER/case", core.ErrInvalidArgument},
		{"a@@b", core.ErrInvalidArgument},
		{"", core.ErrInvalidArgument},
		{reg.Host + "/does/not/exist:1", core.ErrNoSuchImage},
	}
	before := e.snapshot(t)
	for _, c := range cases {
		_, err := e.transfer.Pull(context.Background(), core.PullOptions{Reference: c.ref, TLSVerify: boolPtr(false)})
		if !errors.Is(err, c.want) {
			t.Errorf("pull %q: %v, want %v", c.ref, err, c.want)
		}
	}
	if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
		t.Errorf("refused pulls changed the store: %s", after)
	}
}

// TestPullUnreachableRegistry: a closed port fails fast with a message
// naming the registry, well within the caller's deadline.
func TestPullUnreachableRegistry(t *testing.T) {
	e := newEnv(t)
	addr := registrytest.ClosedAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.transfer.Pull(ctx, core.PullOptions{Reference: addr + "/app:1", TLSVerify: boolPtr(false)})
	if err == nil {
		t.Fatal("pull from a closed port succeeded")
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("took %s to fail", time.Since(start))
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error does not say what failed: %v", err)
	}
	if errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrNoSuchImage) {
		t.Errorf("unreachable registry reported as a client error: %v", err)
	}
}

// TestPullCancelledMidwayLeavesNoLayers: a client that goes away mid-pull
// cancels the copy; no image, no orphaned or incomplete layer remains and
// the store checks clean.
func TestPullCancelledMidwayLeavesNoLayers(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	src := newEnv(t)
	big := withLayer(withLayer(testimage.Busybox("localhost/big:1", "true"), testimage.RandomLayer(8<<20, 1)), testimage.RandomLayer(96<<20, 2))
	if _, err := src.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, big)), core.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/big:1"
	if _, err := src.transfer.Push(context.Background(), "localhost/big:1", core.PushOptions{Destination: ref, TLSVerify: boolPtr(false)}); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t)
	e.load(t, "localhost/other:1")
	before := e.snapshot(t)
	ctx, cancel := context.WithCancel(context.Background())
	progress := &cancelOnWrite{after: "Copying blob", cancel: cancel}
	_, err := e.transfer.Pull(ctx, core.PullOptions{Reference: ref, TLSVerify: boolPtr(false), Progress: progress})
	if err == nil {
		t.Skip("the pull finished before it could be cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Logf("pull error: %v", err)
	}
	if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
		t.Errorf("cancelled pull left something:\nbefore %s\nafter  %s", before, after)
	}
	checkStore(t, e.store.Storage())
	// The same pull then works.
	if _, err := e.transfer.Pull(context.Background(), core.PullOptions{Reference: ref, TLSVerify: boolPtr(false)}); err != nil {
		t.Fatalf("pull after cancel: %v", err)
	}
	checkStore(t, e.store.Storage())
}

// cancelOnWrite cancels once progress mentions after.
type cancelOnWrite struct {
	mu     sync.Mutex
	after  string
	cancel func()
	seen   bytes.Buffer
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen.Write(p)
	if strings.Contains(c.seen.String(), c.after) {
		c.cancel()
	}
	return len(p), nil
}

func TestRegistryCredentials(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "berth", Password: "s3cret"})
	src := newEnv(t)
	src.load(t, "localhost/private:1")
	ref := reg.Host + "/private:1"

	noAuth := core.PushOptions{Destination: ref, TLSVerify: boolPtr(false)}
	if _, err := src.transfer.Push(context.Background(), "localhost/private:1", noAuth); err == nil {
		t.Fatal("push without credentials succeeded")
	}
	wrong := noAuth
	wrong.Auth = &core.RegistryAuth{Default: &core.RegistryCredential{Username: "berth", Password: "nope"}}
	if _, err := src.transfer.Push(context.Background(), "localhost/private:1", wrong); err == nil || !strings.Contains(strings.ToLower(err.Error()), "auth") {
		t.Fatalf("push with a wrong password: %v", err)
	}
	right := noAuth
	right.Auth = &core.RegistryAuth{Default: &core.RegistryCredential{Username: "berth", Password: "s3cret"}}
	if _, err := src.transfer.Push(context.Background(), "localhost/private:1", right); err != nil {
		t.Fatalf("push with credentials: %v", err)
	}

	e := newEnv(t)
	if _, err := e.transfer.Pull(context.Background(), core.PullOptions{Reference: ref, TLSVerify: boolPtr(false)}); err == nil {
		t.Fatal("pull without credentials succeeded")
	}
	perRegistry := &core.RegistryAuth{PerRegistry: map[string]core.RegistryCredential{
		"http://" + reg.Host: {Username: "berth", Password: "s3cret"},
		"other.example":      {Username: "x", Password: "y"},
	}}
	if _, err := e.transfer.Pull(context.Background(), core.PullOptions{Reference: ref, TLSVerify: boolPtr(false), Auth: perRegistry}); err != nil {
		t.Fatalf("pull with per-registry credentials: %v", err)
	}
}

func pushTo(ref string) core.PushOptions {
	return core.PushOptions{Destination: ref, TLSVerify: boolPtr(false)}
}

// TestPullShortNameThroughRegistriesConf: a short name is resolved with the
// engine's own registries configuration; without search registries it is a
// bad reference.
func TestPullShortNameThroughRegistriesConf(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	src := newEnv(t)
	id := src.load(t, "localhost/shorty:1")
	if _, err := src.transfer.Push(context.Background(), "localhost/shorty:1", pushTo(reg.Host+"/shorty:1")); err != nil {
		t.Fatal(err)
	}
	if _, err := src.transfer.Pull(context.Background(), core.PullOptions{Reference: "shorty:1", Policy: core.PullAlways}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("short name with no search registries: %v, want invalid argument", err)
	}

	dir := t.TempDir()
	conf := filepath.Join(dir, "registries.conf")
	content := "unqualified-search-registries = [\"" + reg.Host + "\"]\nshort-name-mode = \"permissive\"\n\n[[registry]]\nlocation = \"" + reg.Host + "\"\ninsecure = true\n"
	if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := imagestore.Open(imagestore.Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), RegistriesConf: conf})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Shutdown()
	tr, err := imagestore.NewTransfer(store, imagestore.TransferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tr.Pull(context.Background(), core.PullOptions{Reference: "shorty:1"})
	if err != nil || !reflect.DeepEqual(ids, []string{id}) {
		t.Fatalf("short-name pull: %v %v", ids, err)
	}
	if _, err := store.Lookup(context.Background(), reg.Host+"/shorty:1"); err != nil {
		t.Errorf("pulled image not stored under its resolved name: %v", err)
	}
}

// TestPullSilentRegistryEndsWithTheRequest: a registry that accepts the
// connection and never answers holds the pull only until the caller's
// deadline.
func TestPullSilentRegistryEndsWithTheRequest(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = e.transfer.Pull(ctx, core.PullOptions{Reference: ln.Addr().String() + "/silent:1", TLSVerify: boolPtr(false)})
	if err == nil {
		t.Fatal("pull from a silent registry succeeded")
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("pull returned %s after the 2s deadline", elapsed)
	}
}

func TestPullAllTags(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	src := newEnv(t)
	src.load(t, "localhost/tags:1")
	img := withLayer(testimage.Busybox("localhost/tags:2", "true"), testimage.RandomLayer(1<<10, 5))
	if _, err := src.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, img)), core.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"1", "2"} {
		if _, err := src.transfer.Push(context.Background(), "localhost/tags:"+tag, pushTo(reg.Host+"/tags:"+tag)); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t)
	ids, err := e.transfer.Pull(context.Background(), core.PullOptions{Reference: reg.Host + "/tags", AllTags: true, TLSVerify: boolPtr(false)})
	if err != nil || len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("allTags pulled %v, %v", ids, err)
	}
	for _, tag := range []string{"1", "2"} {
		if _, err := e.store.Lookup(context.Background(), reg.Host+"/tags:"+tag); err != nil {
			t.Errorf("tag %s not pulled: %v", tag, err)
		}
	}
	if _, err := e.transfer.Pull(context.Background(), core.PullOptions{Reference: reg.Host + "/tags:1", AllTags: true, TLSVerify: boolPtr(false)}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("allTags with a tag: %v, want invalid argument", err)
	}
}
