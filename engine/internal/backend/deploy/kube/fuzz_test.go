package kube

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// FuzzParseDocuments feeds arbitrary bytes to the YAML parser: it must
// answer documents or an ErrInvalidArgument, never panic, and every
// document it accepts names a kind it plays.
func FuzzParseDocuments(f *testing.F) {
	f.Add([]byte(podYAML))
	f.Add([]byte(podYAML + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 2, template: {spec: {containers: [{name: c, image: i}]}}}\n"))
	f.Add([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: aGk=}\n"))
	f.Add([]byte("a: [b\n"))
	f.Add([]byte("---\n- 1\n- 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := parseDocuments(data)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
			return
		}
		for _, d := range docs {
			if _, ok := shapes[d.Kind]; !ok || d.Name == "" {
				t.Fatalf("accepted document %d of kind %q named %q", d.Index, d.Kind, d.Name)
			}
		}
		podNames(docs)
		volumeNames(docs)
	})
}

// FuzzUnpack feeds arbitrary bytes to the archive reader: nothing may land
// outside the target directory.
func FuzzUnpack(f *testing.F) {
	f.Add(tartest.Files(f, map[string]string{"play.yaml": podYAML, "app/Containerfile": "FROM scratch\n"}))
	f.Add(tartest.Files(f, map[string]string{"../escape.yaml": podYAML}))
	f.Add(tartest.Files(f, map[string]string{"a.yaml": podYAML, "b.yml": podYAML}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "ctx")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := unpack(bytes.NewReader(data), dir, 1<<20)
		if err != nil && !errors.Is(err, core.ErrInvalidArgument) && !errors.Is(err, core.ErrTooLarge) {
			t.Fatalf("error %v is neither ErrInvalidArgument nor ErrTooLarge", err)
		}
		entries, _ := os.ReadDir(parent)
		if len(entries) != 1 {
			t.Fatalf("the archive wrote beside its directory: %v", entries)
		}
	})
}

func TestUnpack(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  string
		err   string
	}{
		{"play.yaml wins", map[string]string{"play.yaml": "A", "other.yaml": "B"}, "A", ""},
		{"root yaml joined", map[string]string{"b.yml": "B", "a.yaml": "A", "sub/c.yaml": "C"}, "A\n---\nB", ""},
		{"escape", map[string]string{"../x.yaml": "A"}, "", "escapes"},
		{"no yaml", map[string]string{"readme.txt": "A"}, "", "no play.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := unpack(bytes.NewReader(tartest.Files(t, c.files)), t.TempDir(), 1<<20)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, core.ErrInvalidArgument) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, err := unpack(bytes.NewReader(tartest.Of(t, "link.yaml", "-> /etc/passwd")), t.TempDir(), 1<<20); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("a symlink: %v", err)
	}
	big := tartest.Files(t, map[string]string{"play.yaml": strings.Repeat("x", 100)})
	if _, err := unpack(bytes.NewReader(big), t.TempDir(), 10); !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}
