package dockercli

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestDockerCopyRules: docker cp out of a container lands where dockerd
// would put it: the contents of DIR/. in a directory that did not exist,
// a link as a link (its target with -L), a link to a directory followed
// when the path ends in "/"; nothing lands beside the destination.
func TestDockerCopyRules(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "cp-src", "localhost/busybox:latest", "sh", "-c",
		"mkdir -p /www/sub && echo A > /www/a && echo B > /www/sub/b && ln -s /www/a /www/link && ln -s sub /www/dlink && exec sleep 300")
	te.run("docker", "exec", "cp-src", "test", "-L", "/www/dlink")
	out := t.TempDir()
	dest := func(name string) string { return filepath.Join(out, name) }
	te.run("docker", "cp", "cp-src:/www/.", dest("dot"))
	te.run("docker", "cp", "cp-src:/www/link", dest("link"))
	te.run("docker", "cp", "-L", "cp-src:/www/link", dest("followed"))
	te.run("docker", "cp", "cp-src:/www/dlink", dest("dlink"))
	te.run("docker", "cp", "cp-src:/www/dlink/", dest("dlink-dir"))
	te.run("docker", "cp", "cp-src:/www/sub", dest("sub"))

	var got []string
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == out {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			rel += " -> " + target
		case fi.IsDir():
			rel += "/"
		default:
			data, _ := os.ReadFile(p)
			rel += " " + strings.TrimSpace(string(data))
		}
		got = append(got, rel)
		return nil
	})
	sort.Strings(got)
	want := []string{
		"dlink -> sub", "dlink-dir/", "dlink-dir/b B",
		"dot/", "dot/a A", "dot/dlink -> sub", "dot/link -> /www/a", "dot/sub/", "dot/sub/b B",
		"followed A", "link -> /www/a", "sub/", "sub/b B",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("docker cp wrote:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A path the container lacks, in dockerd's words.
	if msg := te.fails("docker", "cp", "cp-src:/www/none", dest("none")); !strings.Contains(msg, "Could not find the file /www/none in container cp-src") {
		t.Fatalf("docker cp of a missing path: %s", msg)
	}
}
