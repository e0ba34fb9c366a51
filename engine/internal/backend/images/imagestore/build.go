package imagestore

import (
	"fmt"

	"github.com/containers/image/v5/docker/reference"

	"github.com/berth-project/berth/engine/internal/core"
)

// TagName normalizes a name given to tag a built image ("app", "app:1",
// "quay.io/org/app:1") into its stored form: short names go under
// localhost/, a missing tag is latest. A malformed or digested name is an
// ErrInvalidArgument about field.
func TagName(field, name string) (string, error) {
	named, err := localName(name)
	if err != nil {
		return "", core.InvalidArgument(field, fmt.Errorf("%q: %w", name, err))
	}
	if _, ok := named.(reference.Digested); ok {
		return "", core.InvalidArgument(field, fmt.Errorf("%q: a built image cannot be named by digest", name))
	}
	return reference.TagNameOnly(named).String(), nil
}

// Begin registers a writer of layers that is not a transfer (a build), so
// that the sweep after a failed transfer leaves its layers alone while it
// runs. Calling the returned function ends it; failed sweeps the layers
// nothing references once no writer remains.
func (t *Transfer) Begin() (end func(failed bool)) { return t.begin() }

// RuntimeConfigOf reads the runtime configuration of a stored image by ID,
// in either format (Docker's ONBUILD, HEALTHCHECK and SHELL included).
func (s *Store) RuntimeConfigOf(id string) (RuntimeConfig, error) {
	img, err := s.store.Image(id)
	if err != nil {
		return RuntimeConfig{}, fmt.Errorf("image %s: %w", shortID(id), err)
	}
	committed, err := s.readCommitted(img)
	return committed.Config, err
}
