package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/cditest"
)

// exampleSpec is cditest's class, mounting /tmp, its hook /bin/true.
var exampleSpec = cditest.ExampleSpec("/tmp", "/bin/true")

func writeSpec(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func baseSpec() *specs.Spec {
	return &specs.Spec{
		Process: &specs.Process{Env: []string{"PATH=/bin"}},
		Linux:   &specs.Linux{Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}}},
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "example.yaml", exampleSpec)
	r := Open([]string{dir})
	tests := []struct {
		names   []string
		want    []string
		wantErr string
	}{
		{names: []string{"example.com/dev=null"}, want: []string{"example.com/dev=null"}},
		{names: []string{"example.com/dev=all"}, want: []string{"example.com/dev=null", "example.com/dev=zero"}},
		{names: []string{"example.com/dev=zero", "example.com/dev=all"}, want: []string{"example.com/dev=zero", "example.com/dev=null"}},
		{names: []string{"example.com/dev=nope"}, wantErr: `unknown CDI device "example.com/dev=nope"`},
		{names: []string{"other.com/dev=all"}, wantErr: `unknown CDI device "other.com/dev=all"`},
		{names: []string{"example.com=null"}, wantErr: `"example.com=null" is neither a host path nor a CDI device`},
		{names: []string{"example.com/dev=bad name"}, wantErr: `invalid device "example.com/dev=bad name"`},
	}
	for _, tc := range tests {
		got, err := r.Resolve(tc.names)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("Resolve(%v) = %v, %v; want an invalid argument with %q", tc.names, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Resolve(%v) = %v, %v; want %v", tc.names, got, err, tc.want)
		}
	}
}

func TestInjectAppliesEveryEdit(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "example.yaml", exampleSpec)
	r := Open([]string{dir})
	spec := baseSpec()
	if err := r.Inject(spec, []string{"example.com/dev=all"}); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range spec.Linux.Devices {
		paths = append(paths, d.Path)
		if d.Type != "c" || d.Major != 1 {
			t.Errorf("device %s: type %q major %d, want c 1 (from the host's node)", d.Path, d.Type, d.Major)
		}
	}
	if !slices.Equal(paths, []string{"/dev/xnull", "/dev/xzero"}) {
		t.Errorf("device nodes %v", paths)
	}
	rules := spec.Linux.Resources.Devices
	if len(rules) != 3 || rules[0].Allow || !rules[1].Allow || rules[2].Access != "rw" {
		t.Errorf("cgroup rules %+v: want the default deny first, then one allow per node", rules)
	}
	if !slices.Contains(spec.Process.Env, cditest.Env) {
		t.Errorf("env %v lacks %s", spec.Process.Env, cditest.Env)
	}
	if len(spec.Mounts) != 1 || spec.Mounts[0].Destination != "/opt/example" || spec.Mounts[0].Source != "/tmp" {
		t.Errorf("mounts %+v", spec.Mounts)
	}
	if spec.Hooks == nil || len(spec.Hooks.CreateRuntime) != 1 || spec.Hooks.CreateRuntime[0].Path != "/bin/true" {
		t.Errorf("hooks %+v", spec.Hooks)
	}
	// Unknown devices change nothing.
	clean := baseSpec()
	if err := r.Inject(clean, []string{"example.com/dev=null", "example.com/dev=nope"}); err == nil {
		t.Fatal("unknown device injected")
	}
	if len(clean.Linux.Devices) != 0 || len(clean.Process.Env) != 1 {
		t.Errorf("a failed injection edited the spec: %+v", clean)
	}
}

func TestMalformedSpecNamedWhileOthersServed(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "example.yaml", exampleSpec)
	writeSpec(t, dir, "broken.yaml", `cdiVersion: "0.6.0"
kind: broken.com/dev
devices:
- name: one
  containerEdits:
    deviceNodes:
    - hostPath: /dev/null
`)
	writeSpec(t, dir, "garbled.json", `{"cdiVersion": "0.6.0", "kind": 7}`)
	r := Open([]string{dir})
	if _, err := r.Resolve([]string{"example.com/dev=null"}); err != nil {
		t.Fatalf("a good spec beside broken ones: %v", err)
	}
	_, err := r.Resolve([]string{"broken.com/dev=one"})
	if err == nil {
		t.Fatal("a device of a broken spec resolved")
	}
	for _, want := range []string{filepath.Join(dir, "broken.yaml") + ": devices[0].containerEdits.deviceNodes[0].path: missing", filepath.Join(dir, "garbled.json") + ": kind: missing or not a string"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	info := r.Info(t.Context())
	if len(info.Devices) != 2 || len(info.Errors) != 2 {
		t.Errorf("info %+v: want two devices and two failed specs", info)
	}
}

func TestChangesOnDiskCountAtOnce(t *testing.T) {
	dir := t.TempDir()
	r := Open([]string{filepath.Join(dir, "cdi")})
	if _, err := r.Resolve([]string{"example.com/dev=null"}); err == nil {
		t.Fatal("resolved from a directory that does not exist")
	}
	if err := os.Mkdir(filepath.Join(dir, "cdi"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSpec(t, filepath.Join(dir, "cdi"), "example.yaml", exampleSpec)
	if _, err := r.Resolve([]string{"example.com/dev=null"}); err != nil {
		t.Fatalf("a new spec was not picked up: %v", err)
	}
	// Same size, new content: the modification time tells.
	renamed := strings.Replace(exampleSpec, `name: "null"`, `name: "nul2"`, 1)
	time.Sleep(10 * time.Millisecond)
	writeSpec(t, filepath.Join(dir, "cdi"), "example.yaml", renamed)
	if _, err := r.Resolve([]string{"example.com/dev=nul2"}); err != nil {
		t.Fatalf("a changed spec was not picked up: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "cdi", "example.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve([]string{"example.com/dev=zero"}); err == nil {
		t.Fatal("a removed spec still served")
	}
}

// BenchmarkResolveUnchanged is the cost a container create pays when the
// specs did not change: the fingerprint only.
func BenchmarkResolveUnchanged(b *testing.B) {
	dir := b.TempDir()
	writeSpec(&testing.T{}, dir, "example.yaml", exampleSpec)
	r := Open([]string{dir})
	for b.Loop() {
		if _, err := r.Resolve([]string{"example.com/dev=null"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInject is what one device adds when a container's OCI spec is
// written: resolve, then apply every edit (a device node with its cgroup
// rule, an environment variable, a bind mount, a hook).
func BenchmarkInject(b *testing.B) {
	dir := b.TempDir()
	writeSpec(&testing.T{}, dir, "example.yaml", exampleSpec)
	r := Open([]string{dir})
	for b.Loop() {
		if err := r.Inject(baseSpec(), []string{"example.com/dev=null"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOneLetterKind: the library panics validating a kind with a
// one-character vendor or class; such a spec is named like any broken one
// and the others are served, and such a device name is a 400.
func TestOneLetterKind(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "example.yaml", exampleSpec)
	writeSpec(t, dir, "short.yaml", "cdiVersion: \"0.6.0\"\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n    env: [A=1]\n")
	r := Open([]string{dir})
	if _, err := r.Resolve([]string{"example.com/dev=null"}); err != nil {
		t.Fatalf("a good spec beside a one-letter kind: %v", err)
	}
	info := r.Info(t.Context())
	if len(info.Errors) != 1 || !strings.HasSuffix(info.Errors[0].Spec, "short.yaml") || !strings.Contains(info.Errors[0].Error, "two characters") {
		t.Errorf("info errors %+v", info.Errors)
	}
	for _, name := range []string{"a.com/b=x", "a/bb=x"} {
		if _, err := r.Resolve([]string{name}); err == nil || !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("Resolve(%q) = %v, want a 400", name, err)
		}
	}
}
