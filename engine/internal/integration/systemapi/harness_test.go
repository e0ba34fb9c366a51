package systemapi

import (
	"bytes"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine is an in-process engine on a loopback listener, its requests
// under /v5.0.0/libpod (one value per filter).
type testEngine struct{ *enginetest.Engine }

// startEngine starts an engine with its own state, no image and the
// default network mode (bridge); everything it made is removed when the
// test ends.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	te := &testEngine{enginetest.Start(t, enginetest.Options{What: "system API tests", Bridged: true, NoImage: true})}
	te.URL = te.Base() + "/v5.0.0/libpod"
	return te
}

// filters encodes a filters query value.
func filters(f map[string][]string) string {
	data, _ := json.Marshal(f)
	return url.QueryEscape(string(data))
}

// imageWith is an image on the busybox base with one extra file of size bytes.
func imageWith(tags []string, file string, size int, labels map[string]string) testimage.Image {
	return testimage.Image{
		RepoTags: tags,
		Config:   testimage.Config{Cmd: []string{"sh"}, Labels: labels},
		Layers:   []testimage.Layer{{Files: []testimage.File{{Path: file, Data: bytes.Repeat([]byte("x"), size)}}}},
	}
}

// rootfsTar is a one-file root filesystem for imports.
func rootfsTar(t *testing.T) []byte {
	t.Helper()
	return tartest.Of(t, "imported.txt", "imported\n")
}
