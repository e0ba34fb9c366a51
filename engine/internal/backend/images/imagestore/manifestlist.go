package imagestore

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/containers/image/v5/manifest"
	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// listStateKey is the big-data item of a manifest list image that holds the
// list's state (entries, annotations, where each instance comes from). The
// image's manifest (storage.ImageDigestBigDataKey) is derived from it on
// every change, so the image's digest is the list's digest.
const listStateKey = "berth-manifest-list"

// listState is a manifest list as the engine keeps it: richer than either
// wire format (Docker lists have no annotations, OCI indexes no features),
// serialized to the one that can carry what it holds.
type listState struct {
	// Version is the format rule the list is serialized by: 0 for lists
	// written before OCI indexes became the default (they keep the Docker
	// form until annotated, so they read back byte for byte), listVersionOCI
	// for lists created or changed since.
	Version     int               `json:"version,omitempty"`
	Entries     []listEntry       `json:"entries"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Sources maps an instance digest to where its manifest and blobs are
	// read from: "containers-storage:<image ID>" or "docker://<repo>@<digest>".
	Sources map[digest.Digest]string `json:"sources,omitempty"`
}

// listEntry is one instance of a list.
type listEntry struct {
	MediaType   string            `json:"mediaType"`
	Digest      digest.Digest     `json:"digest"`
	Size        int64             `json:"size"`
	Platform    listPlatform      `json:"platform"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// listPlatform is an instance's platform, with Docker's features field.
type listPlatform struct {
	Architecture string   `json:"architecture"`
	OS           string   `json:"os"`
	OSVersion    string   `json:"osVersion,omitempty"`
	OSFeatures   []string `json:"osFeatures,omitempty"`
	Variant      string   `json:"variant,omitempty"`
	Features     []string `json:"features,omitempty"`
}

// entry returns the instance with digest d, or nil.
func (l *listState) entry(d digest.Digest) *listEntry {
	for i := range l.Entries {
		if l.Entries[i].Digest == d {
			return &l.Entries[i]
		}
	}
	return nil
}

// put adds e, replacing an instance with the same digest.
func (l *listState) put(e listEntry, source string) {
	if old := l.entry(e.Digest); old != nil {
		*old = e
	} else {
		l.Entries = append(l.Entries, e)
	}
	if l.Sources == nil {
		l.Sources = map[digest.Digest]string{}
	}
	l.Sources[e.Digest] = source
}

// remove drops the instance with digest d and reports whether it was there.
func (l *listState) remove(d digest.Digest) bool {
	n := len(l.Entries)
	l.Entries = slices.DeleteFunc(l.Entries, func(e listEntry) bool { return e.Digest == d })
	delete(l.Sources, d)
	return len(l.Entries) != n
}

// listVersionOCI is the listState.Version of lists serialized as Podman 5
// does (see preferOCI).
const listVersionOCI = 1

// annotated reports whether the list or any instance carries annotations,
// which only an OCI index can hold.
func (l *listState) annotated() bool {
	if len(l.Annotations) > 0 {
		return true
	}
	for _, e := range l.Entries {
		if len(e.Annotations) > 0 {
			return true
		}
	}
	return false
}

// preferOCI reports whether the list is served and pushed as an OCI index,
// by Podman 5's rule (containers/common's manifests.preferOCI): an index
// when it holds what only an index can carry (annotations), a Docker list
// when it holds what only a Docker list can carry (platform features), an
// index when it has instances, and a Docker list while it is empty (the
// Docker form names its type explicitly). Lists written before this rule
// (Version 0) stay Docker lists until annotated.
func (l *listState) preferOCI() bool {
	if l.annotated() {
		return true
	}
	if l.Version < listVersionOCI {
		return false
	}
	for _, e := range l.Entries {
		if len(e.Platform.Features) > 0 {
			return false
		}
	}
	return len(l.Entries) > 0
}

// mediaType is the type the list is served and pushed as.
func (l *listState) mediaType() string {
	if l.preferOCI() {
		return imgspecv1.MediaTypeImageIndex
	}
	return manifest.DockerV2ListMediaType
}

// serialize renders the list as it is stored, served to copies and pushed:
// an OCI index or a Docker manifest list, as preferOCI chooses. An index
// has no place for platform features (the OCI spec reserves the field), so
// a list holding both annotations and features pushes without the
// features, as Podman's does; inspect shows both.
func (l *listState) serialize() ([]byte, error) {
	if l.preferOCI() {
		index := imgspecv1.Index{
			MediaType:   imgspecv1.MediaTypeImageIndex,
			Annotations: maps.Clone(l.Annotations),
		}
		index.SchemaVersion = 2
		for _, e := range l.Entries {
			index.Manifests = append(index.Manifests, imgspecv1.Descriptor{
				MediaType:   e.MediaType,
				Digest:      e.Digest,
				Size:        e.Size,
				Annotations: maps.Clone(e.Annotations),
				Platform: &imgspecv1.Platform{
					Architecture: e.Platform.Architecture,
					OS:           e.Platform.OS,
					OSVersion:    e.Platform.OSVersion,
					OSFeatures:   slices.Clone(e.Platform.OSFeatures),
					Variant:      e.Platform.Variant,
				},
			})
		}
		return json.Marshal(index)
	}
	list := manifest.Schema2List{SchemaVersion: 2, MediaType: manifest.DockerV2ListMediaType}
	for _, e := range l.Entries {
		list.Manifests = append(list.Manifests, e.dockerDescriptor())
	}
	return json.Marshal(list)
}

// dockerDescriptor is the entry as a Docker list names it.
func (e listEntry) dockerDescriptor() manifest.Schema2ManifestDescriptor {
	d := manifest.Schema2ManifestDescriptor{
		Platform: manifest.Schema2PlatformSpec{
			Architecture: e.Platform.Architecture,
			OS:           e.Platform.OS,
			OSVersion:    e.Platform.OSVersion,
			OSFeatures:   slices.Clone(e.Platform.OSFeatures),
			Variant:      e.Platform.Variant,
			Features:     slices.Clone(e.Platform.Features),
		},
	}
	d.MediaType, d.Digest, d.Size = e.MediaType, e.Digest, e.Size
	return d
}

// inspectDescriptor is one instance as ManifestInspect shows it: Docker's
// descriptor (its platform has features) plus the OCI annotations.
type inspectDescriptor struct {
	manifest.Schema2ManifestDescriptor
	Annotations map[string]string `json:"annotations,omitempty"`
}

// inspectList is ManifestInspect's answer for a local list, Podman 5's
// ManifestListData: every field either wire format can carry, the media
// type the list is pushed as.
type inspectList struct {
	SchemaVersion int                 `json:"schemaVersion"`
	MediaType     string              `json:"mediaType"`
	Manifests     []inspectDescriptor `json:"manifests"`
	Annotations   map[string]string   `json:"annotations,omitempty"`
}

// inspect renders the list as ManifestInspect answers it.
func (l *listState) inspect() ([]byte, error) {
	out := inspectList{SchemaVersion: 2, MediaType: l.mediaType(), Manifests: []inspectDescriptor{}, Annotations: maps.Clone(l.Annotations)}
	for _, e := range l.Entries {
		out.Manifests = append(out.Manifests, inspectDescriptor{Schema2ManifestDescriptor: e.dockerDescriptor(), Annotations: maps.Clone(e.Annotations)})
	}
	return json.Marshal(out)
}

// isManifestList reports whether a stored image is a manifest list.
func isManifestList(st storage.Store, img *storage.Image) bool {
	return slices.Contains(img.BigDataNames, listStateKey) && isListImage(st, img)
}

// isListImage reports whether img's manifest is a list or index.
func isListImage(st storage.Store, img *storage.Image) bool {
	raw, err := st.ImageBigData(img.ID, storage.ImageDigestBigDataKey)
	return err == nil && manifest.MIMETypeIsMultiImage(manifest.GuessMIMEType(raw))
}

// readListState reads a list image's state.
func readListState(st storage.Store, id string) (*listState, error) {
	raw, err := st.ImageBigData(id, listStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading manifest list %s: %w", shortID(id), err)
	}
	var l listState
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("decoding manifest list %s: %w", shortID(id), err)
	}
	return &l, nil
}

// listBigData returns the big-data items that store l: the state, then the
// manifest derived from it (written last, so the image's digest changes only
// once the state it derives from is saved).
func listBigData(l *listState) ([]storage.ImageBigDataOption, digest.Digest, error) {
	state, err := json.Marshal(l)
	if err != nil {
		return nil, "", err
	}
	raw, err := l.serialize()
	if err != nil {
		return nil, "", err
	}
	d := digest.FromBytes(raw)
	return []storage.ImageBigDataOption{
		{Key: listStateKey, Data: state},
		{Key: storage.ImageDigestBigDataKey, Data: raw, Digest: d},
	}, d, nil
}

// writeListState saves l as the state of list image id. A list written
// before OCI indexes became the default takes the current rule now, as
// Podman 5 converts a list it saves.
func writeListState(st storage.Store, id string, l *listState) error {
	l.Version = listVersionOCI
	items, _, err := listBigData(l)
	if err != nil {
		return err
	}
	for _, item := range items {
		if err := st.SetImageBigData(id, item.Key, item.Data, manifest.Digest); err != nil {
			return fmt.Errorf("saving manifest list %s: %w", shortID(id), err)
		}
	}
	return nil
}
