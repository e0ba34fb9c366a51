package imagestore

import (
	"encoding/json"
	"testing"

	"github.com/containers/image/v5/manifest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestListFormatRule checks which wire form a list is stored, served and
// pushed as (Podman 5's rule), and that inspect shows every field.
func TestListFormatRule(t *testing.T) {
	inst := func(features []string, annotations map[string]string) listEntry {
		return listEntry{MediaType: imgspecv1.MediaTypeImageManifest, Digest: "sha256:" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12", Size: 300,
			Platform: listPlatform{Architecture: "arm64", OS: "linux", OSVersion: "10.0", Variant: "v8", Features: features}, Annotations: annotations}
	}
	for _, c := range []struct {
		name  string
		state listState
		want  string
	}{
		{"empty", listState{Version: listVersionOCI}, manifest.DockerV2ListMediaType},
		{"instances", listState{Version: listVersionOCI, Entries: []listEntry{inst(nil, nil)}}, imgspecv1.MediaTypeImageIndex},
		{"features", listState{Version: listVersionOCI, Entries: []listEntry{inst([]string{"sse4"}, nil)}}, manifest.DockerV2ListMediaType},
		{"features and annotations", listState{Version: listVersionOCI, Entries: []listEntry{inst([]string{"sse4"}, map[string]string{"k": "v"})}}, imgspecv1.MediaTypeImageIndex},
		{"index annotations", listState{Version: listVersionOCI, Annotations: map[string]string{"i": "j"}}, imgspecv1.MediaTypeImageIndex},
		{"legacy with instances", listState{Entries: []listEntry{inst(nil, nil)}}, manifest.DockerV2ListMediaType},
		{"legacy annotated", listState{Entries: []listEntry{inst(nil, map[string]string{"k": "v"})}}, imgspecv1.MediaTypeImageIndex},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := c.state.serialize()
			if err != nil {
				t.Fatal(err)
			}
			if got := manifest.GuessMIMEType(raw); got != c.want {
				t.Fatalf("serialized as %s, want %s: %s", got, c.want, raw)
			}
			if _, err := manifest.ListFromBlob(raw, c.want); err != nil {
				t.Fatalf("not a valid %s: %v", c.want, err)
			}
			var shown struct {
				MediaType string `json:"mediaType"`
				Manifests []struct {
					Annotations map[string]string `json:"annotations"`
					Platform    struct {
						OSVersion string   `json:"os.version"`
						Variant   string   `json:"variant"`
						Features  []string `json:"features"`
					} `json:"platform"`
				} `json:"manifests"`
				Annotations map[string]string `json:"annotations"`
			}
			inspected, err := c.state.inspect()
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(inspected, &shown); err != nil {
				t.Fatal(err)
			}
			if shown.MediaType != c.want || len(shown.Manifests) != len(c.state.Entries) || len(shown.Annotations) != len(c.state.Annotations) {
				t.Fatalf("inspect: %s", inspected)
			}
			for i, e := range c.state.Entries {
				m := shown.Manifests[i]
				if m.Platform.OSVersion != e.Platform.OSVersion || m.Platform.Variant != e.Platform.Variant ||
					len(m.Platform.Features) != len(e.Platform.Features) || len(m.Annotations) != len(e.Annotations) {
					t.Errorf("inspect entry %d: %s", i, inspected)
				}
			}
		})
	}
}

// TestLegacyListReadsBack: a list state written before the OCI rule (no
// version field) is served byte for byte as the Docker list it was stored
// as, and takes the OCI rule once it is written again.
func TestLegacyListReadsBack(t *testing.T) {
	const stored = `{"entries":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"sha256:ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12","size":527,"platform":{"architecture":"amd64","os":"linux","features":["sse4"]}}],"sources":{"sha256:ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12":"containers-storage:1234"}}`
	const served = `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","size":527,"digest":"sha256:ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12","platform":{"architecture":"amd64","os":"linux","features":["sse4"]}}]}`
	var l listState
	if err := json.Unmarshal([]byte(stored), &l); err != nil {
		t.Fatal(err)
	}
	raw, err := l.serialize()
	if err != nil || string(raw) != served {
		t.Fatalf("legacy list served as %s (%v), want %s", raw, err, served)
	}
	l.Entries[0].Platform.Features = nil
	if raw, _ := l.serialize(); manifest.GuessMIMEType(raw) != manifest.DockerV2ListMediaType {
		t.Errorf("an unwritten legacy list changed form: %s", raw)
	}
	l.Version = listVersionOCI // what writeListState does
	if raw, _ := l.serialize(); manifest.GuessMIMEType(raw) != imgspecv1.MediaTypeImageIndex {
		t.Errorf("a rewritten list is not an index: %s", raw)
	}
}
