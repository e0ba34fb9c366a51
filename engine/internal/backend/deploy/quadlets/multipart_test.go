package quadlets

import (
	"bytes"
	"context"
	"errors"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// multipartOf builds a multipart/form-data body of file name -> content
// parts (an empty name makes a plain form field) and answers its boundary.
func multipartOf(t testing.TB, files ...string) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(files); i += 2 {
		var w interface{ Write([]byte) (int, error) }
		var err error
		if files[i] == "" {
			w, err = mw.CreateFormField("note")
		} else {
			w, err = mw.CreateFormFile("file", files[i])
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[i+1]))
	}
	mw.Close()
	return &buf, mw.Boundary()
}

// TestStoreInstallsMultipart: a multipart body installs like a tar, each
// part with a file name a file of its base name, fields skipped; the tar
// install's refusals hold.
func TestStoreInstallsMultipart(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "quadlets"))
	if err != nil {
		t.Fatal(err)
	}
	body, boundary := multipartOf(t, "web.container", webUnit, "", "ignored", "sub/web.env", "A=1\n")
	report, err := s.Install(ctx, body, core.QuadletInstallOptions{MultipartBoundary: boundary})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.InstalledQuadlets) != 2 || report.InstalledQuadlets["web.env"] != filepath.Join(s.Dir(), "web.container", "web.env") {
		t.Fatalf("report %+v", report)
	}
	if data, err := os.ReadFile(filepath.Join(s.Dir(), "web.container", "web.env")); err != nil || string(data) != "A=1\n" {
		t.Fatalf("web.env: %q %v", data, err)
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"no file", []string{"", "x"}, "no files found"},
		{"no unit", []string{"a.txt", "x"}, "no quadlet files found"},
		{"two units", []string{"a.container", "[Container]\nImage=x\n", "b.volume", "[Volume]\n"}, "only a single quadlet file"},
		{"the same file twice", []string{"c.container", "[Container]\nImage=x\n", "c.container", "[Container]\nImage=y\n"}, "sent twice"},
		{"parent name", []string{"..", "x", "d.container", "[Container]\nImage=x\n"}, "not a file name"},
		{"bad unit", []string{"e.container", "[Container]\nImagee=x\n"}, "Imagee"},
		{"taken", []string{"web.container", webUnit}, "already exists, refusing to overwrite"},
	} {
		body, boundary := multipartOf(t, tc.files...)
		_, err := s.Install(ctx, body, core.QuadletInstallOptions{MultipartBoundary: boundary})
		if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a 400 naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := s.Install(ctx, strings.NewReader("not multipart"), core.QuadletInstallOptions{MultipartBoundary: "xyz"}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("a body that is not multipart: %v", err)
	}
	if list, _ := s.List(ctx, nil); len(list) != 1 {
		t.Fatalf("refused installs left %+v", list)
	}
}

// FuzzInstallMultipart feeds arbitrary multipart bodies to Install: it
// answers an install or a 4xx error, and never writes outside the store.
func FuzzInstallMultipart(f *testing.F) {
	body, boundary := multipartOf(f, "web.container", webUnit, "web.env", "A=1\n")
	f.Add(body.Bytes(), boundary)
	body, boundary = multipartOf(f, "../x.container", "[Container]\nImage=x\n")
	f.Add(body.Bytes(), boundary)
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.volume\"\r\n\r\n[Volume]\r\n--b--\r\n"), "b")
	f.Fuzz(func(t *testing.T, data []byte, boundary string) {
		if boundary == "" {
			return
		}
		top := t.TempDir()
		s, err := Open(filepath.Join(top, "quadlets"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Install(context.Background(), bytes.NewReader(data), core.QuadletInstallOptions{MultipartBoundary: boundary})
		if err != nil && !errors.Is(err, core.ErrInvalidArgument) && !errors.Is(err, core.ErrTooLarge) {
			t.Fatalf("not a 4xx: %v", err)
		}
		entries, _ := os.ReadDir(top)
		if len(entries) != 1 {
			t.Fatalf("written beside the store: %v", entries)
		}
	})
}
