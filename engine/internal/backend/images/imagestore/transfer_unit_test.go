package imagestore

import (
	"errors"
	"reflect"
	"testing"

	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestRegistryReference(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{in: "busybox", want: "busybox"},
		{in: "docker://quay.io/org/app:1", want: "quay.io/org/app:1"},
		{in: "127.0.0.1:5000/app@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", want: "127.0.0.1:5000/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{in: "localhost:5000/app", want: "localhost:5000/app"},
		{in: "", bad: true},
		{in: "docker-archive:/tmp/x.tar", bad: true},
		{in: "oci-archive:/tmp/x.tar", bad: true},
		{in: "oci:/tmp/dir:tag", bad: true},
		{in: "dir:/tmp/x", bad: true},
		{in: "containers-storage:app", bad: true},
		{in: "docker-daemon:app:1", bad: true},
		{in: "docker:app", bad: true},
		{in: "UPPER", bad: true},
		{in: "a b", bad: true},
		{in: "docker://", bad: true},
	}
	for _, c := range cases {
		got, err := RegistryReference("reference", c.in)
		if c.bad {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("%q: %v, want invalid argument", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

func TestLocalName(t *testing.T) {
	cases := map[string]string{
		"app":                     "localhost/app:latest",
		"app:1":                   "localhost/app:1",
		"team/app:1":              "localhost/team/app:1",
		"docker.io/library/app:1": "docker.io/library/app:1",
		"quay.io/org/app":         "quay.io/org/app:latest",
		"localhost/app:2":         "localhost/app:2",
		"127.0.0.1:5000/app:3":    "127.0.0.1:5000/app:3",
	}
	for in, want := range cases {
		got, err := localName(in)
		if err != nil || got.String() != want {
			t.Errorf("%q: %v %v, want %q", in, got, err, want)
		}
	}
	if _, err := localName("Bad Name"); err == nil {
		t.Error("malformed name accepted")
	}
}

func TestApplyChanges(t *testing.T) {
	cfg, err := ApplyChanges(imgspecv1.ImageConfig{Env: []string{"A=0"}}, []string{
		"CMD [\"a\",\"b\"]", "cmd=/bin/true", "ENV A=1 B=2", "ENV C three four", "LABEL x=\"y z\"", "EXPOSE 80 90-91/udp",
		"VOLUME [\"/a\",\"/b\"]", "WORKDIR /w", "USER 1000:1000", "ENTRYPOINT [\"/e\"]", "STOPSIGNAL 9",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := imgspecv1.ImageConfig{
		Cmd:          []string{"/bin/sh", "-c", "/bin/true"},
		Env:          []string{"A=1", "B=2", "C=three four"},
		Labels:       map[string]string{"x": "y z"},
		ExposedPorts: map[string]struct{}{"80/tcp": {}, "90-91/udp": {}},
		Volumes:      map[string]struct{}{"/a": {}, "/b": {}},
		WorkingDir:   "/w",
		User:         "1000:1000",
		Entrypoint:   []string{"/e"},
		StopSignal:   "9",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
	for _, bad := range []string{"RUN x", "ONBUILD RUN x", "EXPOSE 0", "EXPOSE 80/xyz", "VOLUME rel", "ENV", "LABEL =x", "CMD", "ENV A=\"open"} {
		if _, err := ApplyChanges(imgspecv1.ImageConfig{}, []string{bad}); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid argument", bad, err)
		}
	}
}

func TestParseScpDestination(t *testing.T) {
	for _, good := range []string{"copy:1", "tcp://127.0.0.1:8080::", "tcp://127.0.0.1:8080::x:1", "http://h:1", "unix:///run/berth.sock::y", "https://h::"} {
		if _, err := parseScpDestination(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", "::", "ssh://h::", "tcp://::", "unix://::", "Bad Name", "tcp://h::Bad Name"} {
		if _, err := parseScpDestination(bad); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid argument", bad, err)
		}
	}
}

// FuzzApplyChanges: any change list is applied or refused as a bad argument, never panics.
func FuzzApplyChanges(f *testing.F) {
	for _, seed := range []string{"CMD [\"a\"]", "ENV A=1 B=\"x y\"", "EXPOSE 80/udp", "VOLUME [\"/v\"]", "LABEL a b", "RUN x", "ENV A='", "=", "EXPOSE 1-"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, change string) {
		if _, err := ApplyChanges(imgspecv1.ImageConfig{}, []string{change}); err != nil && !errors.Is(err, core.ErrInvalidArgument) {
			t.Fatalf("%q: error %v is not an invalid argument", change, err)
		}
	})
}

// FuzzRegistryReference: a reference is accepted only when it parses as a
// registry name; everything else is a bad argument.
func FuzzRegistryReference(f *testing.F) {
	for _, seed := range []string{"busybox", "docker://a/b:1", "oci:/x", "localhost:5000/a", "a@sha256:00", "docker-archive:x", "::", "A"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		got, err := RegistryReference("reference", ref)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%q: %v", ref, err)
			}
			return
		}
		if _, err := RegistryReference("reference", got); err != nil {
			t.Fatalf("%q accepted as %q, which is then refused: %v", ref, got, err)
		}
	})
}

// FuzzParseScpDestination: any destination parses or is refused as a bad argument.
func FuzzParseScpDestination(f *testing.F) {
	for _, s := range []string{"x:1", "tcp://127.0.0.1:1::", "unix:///s::n:1", "http://h::", "ssh://h::", "::", "tcp://[::1]:8080::a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dest string) {
		target, err := parseScpDestination(dest)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%q: %v", dest, err)
			}
			return
		}
		if target.engine == nil && target.name == "" {
			t.Fatalf("%q accepted with neither engine nor name", dest)
		}
	})
}
