package quadlets

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// tarOf builds a tar archive of name -> content (a trailing "/" makes a directory).
func tarOf(t testing.TB, files ...string) *bytes.Buffer {
	t.Helper()
	return bytes.NewBuffer(tartest.Of(t, files...))
}

const webUnit = "[Container]\nImage=busybox\nEnvironmentFile=web.env\nPod=db.pod\n"

// TestStoreInstallListRemove covers the life of one quadlet in the store.
func TestStoreInstallListRemove(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	report, err := s.Install(ctx, tarOf(t, "conf/", "", "web.container", webUnit, "conf/web.env", "A=1\n"), core.QuadletInstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.InstalledQuadlets) != 2 || report.InstalledQuadlets["web.container"] != filepath.Join(s.Dir(), "web.container", "web.container") {
		t.Fatalf("report %+v", report)
	}
	if text, err := s.Print(ctx, "web.container"); err != nil || text != webUnit {
		t.Fatalf("print: %q %v", text, err)
	}
	list, err := s.List(ctx, map[string][]string{"name": {"^web"}})
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if q := list[0]; q.UnitName != "web.service" || q.Pod != "db.pod" || q.App != "web.container" || q.Status != "Not loaded" {
		t.Fatalf("entry %+v", q)
	}
	if list, _ := s.List(ctx, map[string][]string{"name": {"^db"}}); len(list) != 0 {
		t.Fatalf("filter name=^db kept %+v", list)
	}
	if _, err := s.List(ctx, map[string][]string{"label": {"x"}}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("filter label: %v", err)
	}
	if _, err := s.Install(ctx, tarOf(t, "web.container", webUnit), core.QuadletInstallOptions{}); !errors.Is(err, core.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "a Quadlet with name web.container already exists, refusing to overwrite") {
		t.Fatalf("second install without replace: %v", err)
	}
	replaced := "[Container]\nImage=alpine\n"
	if _, err := s.Install(ctx, tarOf(t, "web.container", replaced), core.QuadletInstallOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	if text, _ := s.Print(ctx, "web.container"); text != replaced {
		t.Fatalf("after replace: %q", text)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "web.container", "conf")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("replace kept the old files: %v", err)
	}
	rm, err := s.Remove(ctx, []string{"web.container", "gone.volume"}, core.QuadletRemoveOptions{})
	if err != nil || len(rm.Removed) != 1 || rm.Errors["gone.volume"] == "" {
		t.Fatalf("remove: %+v %v", rm, err)
	}
	if err := s.Exists(ctx, "web.container"); !errors.Is(err, core.ErrNoSuchQuadlet) {
		t.Fatalf("exists after remove: %v", err)
	}
	if entries, _ := os.ReadDir(s.Dir()); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestStoreRefusesBadArchives: each bad archive is refused with the right
// error and leaves nothing in the quadlet directory.
func TestStoreRefusesBadArchives(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		archive *bytes.Buffer
		want    string
	}{
		{"escape", tarOf(t, "web.container", "[Container]\nImage=x\n", "../evil", "x"), "escapes the quadlet directory"},
		{"absolute", tarOf(t, "/etc/web.container", "[Container]\nImage=x\n"), "escapes the quadlet directory"},
		{"deep escape", tarOf(t, "a/../../web.container", "[Container]\nImage=x\n"), "escapes the quadlet directory"},
		{"symlink", tarOf(t, "web.container", "-> /etc/passwd"), "only regular files and directories"},
		{"unknown extension", tarOf(t, "web.conatiner", "[Container]\nImage=x\n"), "no quadlet files found"},
		{"two units", tarOf(t, "a.container", "[Container]\nImage=x\n", "b.volume", "[Volume]\n"), "only a single quadlet file"},
		{"empty", tarOf(t), "no files found"},
		{"not a tar", bytes.NewBufferString(strings.Repeat("x", 1024)), "tar archive"},
		{"bad unit", tarOf(t, "web.container", "[Container]\nImage=x\nImagee=y\n"), "web.container line 3: [Container] key Imagee: unsupported key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Install(context.Background(), tc.archive, core.QuadletInstallOptions{})
			if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want invalid argument with %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("left behind: %v", entries)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
		t.Fatal("an escaping entry was written")
	}
}

// crashDirEnv makes the test binary a child that installs in a loop until
// killed (see TestStoreSurvivesKill).
const crashDirEnv = "BERTH_QUADLET_CRASH_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		installForever(dir)
		return
	}
	os.Exit(m.Run())
}

// versioned is an install whose unit and 40 extra files all carry version v.
func versioned(t testing.TB, v int) *bytes.Buffer {
	files := []string{"app.container", fmt.Sprintf("[Container]\nImage=busybox\nLabel=v=%d\n", v)}
	for i := 0; i < 40; i++ {
		files = append(files, fmt.Sprintf("files/f%02d", i), strings.Repeat(fmt.Sprint(v), 512))
	}
	return tarOf(t, files...)
}

func installForever(dir string) {
	s, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for v := 1; ; v++ {
		if _, err := s.Install(context.Background(), versioned(&testing.T{}, v%10), core.QuadletInstallOptions{Replace: true}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if v == 1 {
			fmt.Println("installed")
		}
	}
}

// TestStoreSurvivesKill kills (SIGKILL) a process replacing a quadlet in a
// loop, at varying moments, then reopens the directory: the quadlet is
// there, whole and of one version, and no staged or moved-aside files stay.
func TestStoreSurvivesKill(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	dir := t.TempDir()
	for round := 0; round < 12; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		var out bytes.Buffer
		cmd.Stderr = &out
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the child's first completed install.
		if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
			t.Fatalf("round %d: child: %v %s", round, err, out.String())
		}
		time.Sleep(time.Duration(20+round*7) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child ended by itself (%v): %s", round, err, out.String())
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "app.container" {
				t.Fatalf("round %d: left behind %s", round, e.Name())
			}
		}
		text, err := s.Print(context.Background(), "app.container")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		v := strings.TrimSpace(text[strings.Index(text, "v=")+2:])
		for i := 0; i < 40; i++ {
			data, err := os.ReadFile(filepath.Join(dir, "app.container", "files", fmt.Sprintf("f%02d", i)))
			if err != nil || string(data) != strings.Repeat(v, 512) {
				t.Fatalf("round %d: file %d is not of version %s: %v", round, i, v, err)
			}
		}
	}
}
