package imagestore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

func TestOpenWritesConfigurationOnce(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Driver: "vfs"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Storage().GraphDriverName() != "vfs" {
		t.Errorf("driver %s", s.Storage().GraphDriverName())
	}
	conf := filepath.Join(dir, "root", "registries.conf")
	data, err := os.ReadFile(conf)
	if err != nil || !strings.Contains(string(data), "unqualified-search-registries = []") {
		t.Fatalf("registries.conf: %q %v", data, err)
	}
	if len(s.SearchRegistries()) != 0 || s.SystemContext().SystemRegistriesConfPath != conf {
		t.Errorf("search registries %v, conf %s", s.SearchRegistries(), s.SystemContext().SystemRegistriesConfPath)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}

	// A user's edit survives the next start.
	edited := "unqualified-search-registries = [\"registry.example\"]\n"
	if err := os.WriteFile(conf, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Driver: "vfs"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if got := s.SearchRegistries(); len(got) != 1 || got[0] != "registry.example" {
		t.Errorf("search registries after edit: %v", got)
	}
}

func TestOpenChoosesAWorkingDriver(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if d := s.Storage().GraphDriverName(); d != "overlay" && d != "vfs" {
		t.Errorf("driver %s", d)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(Options{Root: dir, RunRoot: dir, Driver: "btrfs"}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("unknown driver: %v", err)
	}
	if _, err := Open(Options{RunRoot: dir}); err == nil {
		t.Error("empty root accepted")
	}
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("unqualified-search-registries = ["), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Root: filepath.Join(dir, "r"), RunRoot: filepath.Join(dir, "rr"), Driver: "vfs", RegistriesConf: bad}); err == nil {
		t.Error("a malformed registries.conf was accepted")
	}
}
