// Package cdi hands host devices to containers through the Container Device
// Interface: vendors (or an administrator) describe devices in spec files
// under /etc/cdi and /var/run/cdi, and a container asks for them by name
// ("nvidia.com/gpu=0", "example.com/dev=all"). Every edit a device's spec
// makes (device nodes with their cgroup rules, mounts, environment, hooks,
// additional groups) goes into the container's OCI spec.
//
// Parsing, validation and the edits themselves are the reference library's
// (tags.cncf.io/container-device-interface). This package decides when the
// spec directories are read again: on each use, when a cheap fingerprint of
// the directories (names, sizes and modification times of the spec files)
// changed. So a spec written, changed or removed counts from the next
// request on, deterministically and without a watcher goroutine, and a run
// whose specs did not change pays a few stat calls.
package cdi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// DefaultSpecDirs are the directories read when none are configured:
// static specs first, generated ones (which win a conflict) second.
var DefaultSpecDirs = []string{cdilib.DefaultStaticDir, cdilib.DefaultDynamicDir}

// allDevices is the device name that, where no spec defines it, stands for
// every device of its kind.
const allDevices = "all"

// Registry implements core.CDIRegistry over a set of spec directories.
type Registry struct {
	dirs  []string
	cache *cdilib.Cache

	// mu orders refreshes; stamp is the fingerprint the cache was loaded
	// at, generation counts the loads from a start unique to this run.
	mu         sync.Mutex
	stamp      string
	generation uint64
	// loadErrors are the spec files whose last reload failed as a whole.
	loadErrors []core.CDISpecError
}

var _ core.CDIRegistry = (*Registry)(nil)

// Open reads the spec directories (DefaultSpecDirs when dirs is empty), in
// order of increasing priority: a device defined in two directories is the
// later one's. A directory that does not exist offers nothing until it
// appears; a spec that fails to load is reported, and the others are
// served.
func Open(dirs []string) *Registry {
	if len(dirs) == 0 {
		dirs = DefaultSpecDirs
	}
	clean := make([]string, 0, len(dirs))
	for _, d := range dirs {
		clean = append(clean, filepath.Clean(d))
	}
	// Before the library validates a spec (which panics on a kind with a
	// one-character vendor or class), this turns such a spec into an error
	// of its file; the other specs are still served.
	validatorOnce.Do(func() { cdilib.SetSpecValidator(kindValidator{}) })
	r := &Registry{dirs: clean}
	// Manual refresh: the fingerprint decides (see the package comment).
	// An empty cache, then the directories: the library loads them when
	// configured, and a spec it fails on is caught and named (refresh).
	r.cache, _ = cdilib.NewCache(cdilib.WithSpecDirs(), cdilib.WithAutoRefresh(false))
	r.reloadWith(fingerprint(clean), func() { _ = r.cache.Configure(cdilib.WithSpecDirs(clean...)) })
	r.generation = uint64(time.Now().UnixNano())
	return r
}

// Dirs are the spec directories, lowest priority first.
func (r *Registry) Dirs() []string { return append([]string(nil), r.dirs...) }

// refresh reloads the specs when the directories changed since the last load.
func (r *Registry) refresh() {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp := fingerprint(r.dirs)
	if stamp == r.stamp {
		return
	}
	r.reloadWith(stamp, func() { _ = r.cache.Refresh() })
}

// reloadWith runs a load of the library at the given fingerprint (r.mu
// held, or r not shared yet).
func (r *Registry) reloadWith(stamp string, load func()) {
	r.stamp = stamp
	r.loadErrors = nil
	if err := guard(load); err != nil {
		// The specs stay as last loaded; said until the directories change.
		r.loadErrors = append(r.loadErrors, core.CDISpecError{Spec: strings.Join(r.dirs, ", "), Error: err.Error() + "; the specs are served as last loaded"})
		return
	}
	r.generation++
}

// validatorOnce installs kindValidator, the library's one (global) hook.
var validatorOnce sync.Once

// kindValidator refuses a spec whose kind the library cannot validate
// without panicking (see kindProblem).
type kindValidator struct{}

func (kindValidator) Validate(raw *cdispec.Spec) error {
	if p := kindProblem(raw.Kind); p != "" {
		return errors.New("kind: " + p)
	}
	return nil
}

// guard runs a load of the library (its errors per file are kept by the
// cache) and returns a panic of it as an error: it has one on a
// one-character vendor or class, and the cache is then left as it was.
func guard(load func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reading the specs failed: %v", p)
		}
	}()
	load()
	return nil
}

// Generation implements core.CDIRegistry.
func (r *Registry) Generation() uint64 {
	r.refresh()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.generation
}

// fingerprint describes what the library would read: the spec files
// (.json and .yaml, links followed) directly in each directory.
func fingerprint(dirs []string) string {
	var b strings.Builder
	for _, dir := range dirs {
		b.WriteString(dir)
		b.WriteByte(0)
		entries, err := os.ReadDir(dir)
		if err != nil {
			b.WriteString(err.Error())
			b.WriteByte(0)
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if ext := filepath.Ext(name); ext != ".json" && ext != ".yaml" {
				continue
			}
			b.WriteString(name)
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
				b.WriteByte(' ')
				b.WriteString(strconv.FormatInt(fi.Size(), 10))
				b.WriteByte(' ')
				b.WriteString(strconv.FormatInt(fi.ModTime().UnixNano(), 10))
				b.WriteByte(' ')
				b.WriteString(fi.Mode().String())
			}
			b.WriteByte(0)
		}
	}
	return b.String()
}

// Resolve implements core.CDIRegistry.
func (r *Registry) Resolve(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	r.refresh()
	return r.resolve(names)
}

func (r *Registry) resolve(names []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	var known []string
	for _, name := range names {
		if vendor, class, _ := parser.ParseDevice(name); vendor != "" && (len(vendor) < 2 || len(class) < 2) {
			return nil, core.InvalidArgument("devices", fmt.Errorf("%q: the vendor and the class of a CDI device need two characters or more", name))
		}
		vendor, class, dev, err := parser.ParseQualifiedName(name)
		if err != nil {
			return nil, core.InvalidArgument("devices", fmt.Errorf("%q is neither a host path nor a CDI device (vendor.com/class=name): %w", name, err))
		}
		if r.cache.GetDevice(name) != nil {
			add(name)
			continue
		}
		if dev == allDevices {
			if known == nil {
				known = r.cache.ListDevices()
			}
			prefix := parser.QualifiedName(vendor, class, "")
			found := false
			for _, k := range known {
				if strings.HasPrefix(k, prefix) {
					add(k)
					found = true
				}
			}
			if found {
				continue
			}
		}
		return nil, core.InvalidArgument("devices", r.unknown(name))
	}
	return out, nil
}

// unknown says that a device is not defined and, where spec files failed to
// load, which and why: the device may be in one of them.
func (r *Registry) unknown(name string) error {
	msg := fmt.Sprintf("unknown CDI device %q (spec directories %s)", name, strings.Join(r.dirs, ", "))
	if errs := r.specErrors(); len(errs) > 0 {
		parts := make([]string, 0, len(errs))
		for _, e := range errs {
			parts = append(parts, e.Spec+": "+e.Error)
		}
		msg += "; specs that failed to load: " + strings.Join(parts, "; ")
	}
	return errors.New(msg)
}

// Vendors implements core.CDIRegistry.
func (r *Registry) Vendors() []string {
	r.refresh()
	return r.cache.ListVendors()
}

// Inject implements core.CDIRegistry.
func (r *Registry) Inject(spec *specs.Spec, names []string) error {
	if len(names) == 0 {
		return nil
	}
	r.refresh()
	resolved, err := r.resolve(names)
	if err != nil {
		return err
	}
	if unresolved, err := r.cache.InjectDevices(spec, resolved...); err != nil {
		if len(unresolved) > 0 {
			// Removed between resolve and inject.
			return core.InvalidArgument("devices", r.unknown(unresolved[0]))
		}
		return core.InvalidArgument("devices", err)
	}
	return nil
}

// Info implements core.CDIRegistry.
func (r *Registry) Info(context.Context) core.CDIInfo {
	r.refresh()
	info := core.CDIInfo{SpecDirs: r.Dirs(), Devices: []core.CDIDevice{}}
	for _, name := range r.cache.ListDevices() {
		d := r.cache.GetDevice(name)
		if d == nil {
			continue
		}
		info.Devices = append(info.Devices, core.CDIDevice{Name: name, Spec: d.GetSpec().GetPath()})
	}
	info.Errors = r.specErrors()
	return info
}

// specErrors lists the specs that failed to load, by file.
func (r *Registry) specErrors() []core.CDISpecError {
	var out []core.CDISpecError
	for path, errs := range r.cache.GetErrors() {
		msgs := make([]string, 0, len(errs))
		if field := diagnose(path); field != "" {
			msgs = append(msgs, field)
		}
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		out = append(out, core.CDISpecError{Spec: path, Error: strings.Join(msgs, "; ")})
	}
	r.mu.Lock()
	out = append(out, r.loadErrors...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Spec < out[j].Spec })
	return out
}
