// Package quadletactivate turns installed quadlet units into the engine
// objects they describe, as systemd would through Podman's generated
// services on a host that runs systemd: a .image pulls, a .network and a
// .volume create, a .pod creates and starts the pod (and its member
// containers), a .container creates and starts the container, a .build
// builds and a .kube plays its YAML. Every object an activation creates is
// recorded in the state database before it is created, so a removal with
// force, a failed activation and an engine that was killed half way tear
// down exactly what was made. It goes through the engine's core interfaces
// only.
package quadletactivate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/backend/platform/words"
	"github.com/berth-project/berth/engine/internal/core"
)

// unit is one parsed quadlet unit file.
type unit struct {
	// name is the quadlet's name (web.container), kind its section
	// (Container), dir the directory of its unit file (relative paths in
	// the unit are relative to it).
	name, kind, dir string
	entries         []quadlets.Entry
	// dry marks a unit checked before its files are installed: the files
	// it names are not read.
	dry bool
}

func parseUnit(name, file string, data []byte) *unit {
	return &unit{name: name, kind: quadlets.Kind(name), dir: filepath.Dir(file), entries: quadlets.Entries(data)}
}

// base is the unit's name without its extension (web for web.container).
func (u *unit) base() string { return strings.TrimSuffix(u.name, filepath.Ext(u.name)) }

// all answers every entry of key in the unit's own section.
func (u *unit) all(key string) []quadlets.Entry {
	return u.allIn(u.kind, key)
}

func (u *unit) allIn(section, key string) []quadlets.Entry {
	var out []quadlets.Entry
	for _, e := range u.entries {
		if e.Section == section && e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// last answers the last value of key in the unit's section (systemd: the
// last assignment wins) and whether it is set.
func (u *unit) last(key string) (string, bool) {
	es := u.all(key)
	if len(es) == 0 {
		return "", false
	}
	return es[len(es)-1].Value, true
}

// value is last without the flag.
func (u *unit) value(key string) string {
	v, _ := u.last(key)
	return v
}

// words splits every value of key into systemd words and concatenates them.
func (u *unit) words(key string) ([]string, error) {
	var out []string
	for _, e := range u.all(key) {
		w, err := splitWords(e.Value)
		if err != nil {
			return nil, u.errAt(e, err)
		}
		out = append(out, w...)
	}
	return out, nil
}

// assignments reads KEY=VALUE words of every value of key into a map.
func (u *unit) assignments(key string) (map[string]string, error) {
	words, err := u.words(key)
	if err != nil || len(words) == 0 {
		return nil, err
	}
	out := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			e := u.all(key)[0]
			return nil, u.errAt(e, fmt.Errorf("%q is not KEY=VALUE", w))
		}
		out[k] = v
	}
	return out, nil
}

// boolean reads a systemd boolean key (validated at install).
func (u *unit) boolean(key string) bool {
	b, _ := quadlets.ParseBool(u.value(key))
	return b
}

// errAt is a UnitError for entry e as an ErrInvalidArgument.
func (u *unit) errAt(e quadlets.Entry, err error) error {
	ue := &quadlets.UnitError{File: u.name, Line: e.Line, Section: e.Section, Key: e.Key, Reason: err.Error()}
	return core.InvalidArgument("quadlet", ue)
}

// hostPath resolves a path of the unit: absolute as is, relative to the
// unit file's directory (as Podman's generator resolves them).
func (u *unit) hostPath(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(u.dir, p)
}

// readUnit loads installed quadlet name from the store.
func readUnit(store UnitStore, name string) (*unit, error) {
	file, err := store.UnitFile(name)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("quadlet %s: %w", name, err)
	}
	return parseUnit(name, file, data), nil
}

// splitWords splits a value into words as systemd does for Exec= and
// Environment=: whitespace separates, double or single quotes group, a
// backslash escapes the next character.
func splitWords(s string) ([]string, error) {
	w, err := words.Split(s, words.Rules{Separators: " \t\n", Escapes: true})
	if err != nil {
		return nil, fmt.Errorf("%w in %q", err, s)
	}
	return w, nil
}
