package volumes

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// FuzzMountOptions feeds arbitrary type, device and o options (a client's
// volume create request) to the mount option parser: it refuses with an
// invalid argument naming Options or answers a mount, never panics.
func FuzzMountOptions(f *testing.F) {
	for _, seed := range [][3]string{
		{"tmpfs", "", "size=10m,nodev,noexec"}, {"none", "/tmp", "bind,ro"}, {"", "/tmp", "rbind"},
		{"ext4", "/dev/sda", ""}, {"", "", "size=1m"}, {"tmpfs", "", "uid="}, {"", "", "nocopy"},
		{"", "", "uid=1000,gid=1000"}, {"", "", "uid=x"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, typ, device, o string) {
		ms, err := parseMountOptions(map[string]string{"type": typ, "device": device, "o": o})
		if err != nil {
			var fe *core.FieldError
			if !errors.As(err, &fe) || fe.Field != "Options" {
				t.Fatalf("%q %q %q: %v is not an invalid Options", typ, device, o, err)
			}
			return
		}
		if ms != nil && ms.bind && ms.source == "" {
			t.Fatalf("%q %q %q: a bind mount without a source", typ, device, o)
		}
	})
}

// FuzzImportTar feeds arbitrary bytes (a client's import body) to the tar
// check: a refusal is an invalid argument, never a panic, and whatever
// passes has no entry with a ".." component.
func FuzzImportTar(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "a/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	tw.Write([]byte("hi"))
	tw.WriteHeader(&tar.Header{Name: "../x", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.Close()
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:700])
	f.Add([]byte("not a tar"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var out bytes.Buffer
		err := checkTar(bytes.NewReader(body), &out)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%v is not an invalid argument", err)
			}
			return
		}
		tr := tar.NewReader(&out)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatalf("the checked tar does not read back: %v", err)
			}
			if escapes(hdr.Name) || escapes(linkTarget(hdr)) {
				t.Fatalf("entry %q passed", hdr.Name)
			}
		}
	})
}

// TestCheckTarEmptyArchive: the archive of an empty volume (only the
// end-of-archive marker, as Export writes it) imports; an empty body or a
// lone zero block is no tar.
func TestCheckTarEmptyArchive(t *testing.T) {
	var empty bytes.Buffer
	tar.NewWriter(&empty).Close()
	if err := checkTar(bytes.NewReader(empty.Bytes()), io.Discard); err != nil {
		t.Fatalf("an empty archive: %v", err)
	}
	for name, body := range map[string][]byte{"empty body": nil, "one zero block": make([]byte, 512)} {
		if err := checkTar(bytes.NewReader(body), io.Discard); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an invalid argument", name, err)
		}
	}
}
