package enginetest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// shared is the in-process engine a package's tests share (Shared): one
// engine start and image load for the whole package instead of one per
// test, which keeps a suite short where each costs much (the host lab's
// emulated VM).
var shared struct {
	once sync.Once
	e    *Engine // its T is the test that started it
	stop func()  // stops it; nil until it serves
}

// Shared returns a client of the in-process engine that the package's
// tests share, started with o by the first test that asks (o's Needs are
// checked for every test; LongDir, BeforeStop and AfterStop are not used)
// and stopped by Main after the last test. What each test made is removed
// when it ends (RemoveAll), and the test fails for whatever of its pods
// and containers is still on the host then (Leaks); once the engine has
// stopped, Main fails the run for what it left (HostLeaks).
func Shared(t testing.TB, o Options) *Engine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	RequireRuntime(t, o.What)
	Require(t, o.What, o.Needs...)
	shared.once.Do(func() { startShared(t, o) })
	if shared.stop == nil {
		t.Fatal("the shared engine did not start (see the first test that asked for it)")
	}
	e := *shared.e
	e.T, e.Client = t, &http.Client{}
	t.Cleanup(func() {
		pods, ctrs := e.objectIDs()
		e.RemoveAll()
		for _, l := range settled(func() []string { return e.Leaks(pods, ctrs) }) {
			t.Errorf("left on the host after the test's objects were removed: %s", l)
		}
	})
	return &e
}

// startShared starts the shared engine with t, the first test that asks
// for it; a failure fails that test and leaves shared.stop nil. Its
// directory is not a test's own (it outlives the first test): Main
// removes it.
func startShared(t testing.TB, o Options) {
	t.Helper()
	dir, err := os.MkdirTemp("", "berth-shared-")
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{T: t, Dir: dir, Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Nets: UniqueNetworks(t), Client: &http.Client{}}
	if !o.Bridged {
		e.Nets.DefaultMode = "private"
	}
	if o.Network != nil {
		o.Network(&e.Nets)
	}
	cfg := engine.Config{Root: e.Root, RunRoot: e.RunRoot, Runtime: "runc", Network: e.Nets}
	if o.Config != nil {
		o.Config(e, &cfg)
	}
	removeDir := func() { UnmountUnder(dir, 2); os.RemoveAll(dir) }
	var stop func()
	ok := false
	defer func() {
		if !ok {
			if stop != nil {
				stop()
			}
			removeDir()
		}
	}()
	e.Eng, e.Addr, stop = serve(t, o.Logger, cfg)
	e.URL = libpodURL(e.Addr)
	shared.e = e
	e.loadImage(o)
	ok = true
	shared.stop = func() {
		stop()
		leaks := settled(func() []string { return e.HostLeaks(nil, nil) })
		for _, l := range leaks {
			fmt.Fprintf(os.Stderr, "FAIL: left on the host after the shared engine stopped with its objects removed: %s\n", l)
		}
		removeDir()
		sharedLeaked = len(leaks) > 0
	}
}

// sharedLeaked is whether the shared engine left something on the host
// (Main then fails the run).
var sharedLeaked bool

// stopShared stops the shared engine if one serves.
func stopShared() {
	if shared.stop != nil {
		shared.stop()
		shared.stop = nil
	}
}
