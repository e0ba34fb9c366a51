package oci

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	imgspec "github.com/opencontainers/image-spec/specs-go/v1"
)

// FuzzGenerate turns arbitrary (valid JSON) creation requests into OCI
// specs: no panic, and a failure is either a request error naming its field
// or a filesystem error from the rootfs.
func FuzzGenerate(f *testing.F) {
	f.Add([]byte(`{"image":"busybox","command":["true"],"netns":{"nsmode":"none"}}`))
	f.Add([]byte(`{"image":"busybox","user":"1000:1000","work_dir":"/w","umask":"0077","cap_add":["NET_ADMIN"],"cap_drop":["ALL"]}`))
	f.Add([]byte(`{"image":"busybox","r_limits":[{"type":"nofile","hard":-1,"soft":10}],"mounts":[{"destination":"/t","type":"tmpfs","options":["size=1m"]}]}`))
	f.Add([]byte(`{"image":"busybox","resource_limits":{"cpu":{"shares":1,"quota":5}},"netns":{"nsmode":"path","value":"rel"}}`))
	f.Add([]byte(`{"image":"busybox","hostadd":["h:1.2.3.4","bad"],"shm_size":-1}`))
	root := f.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\n"), 0o644)
	host := Host{HardLimits: map[string]uint64{"RLIMIT_NOFILE": 1024}, BoundingCaps: DefaultCapabilities()}
	f.Fuzz(func(t *testing.T, body []byte) {
		var spec core.ContainerSpec
		if json.Unmarshal(body, &spec) != nil {
			return
		}
		// Keep the fuzzer inside its rootfs: directories it creates for
		// work_dir land under root, never elsewhere.
		res, err := Generate(Input{ID: strings.Repeat("b", 64), Spec: &spec, Image: imgspec.ImageConfig{Cmd: []string{"sh"}},
			Rootfs: root, HostsFile: "/h", ResolvConfFile: "/r", HostnameFile: "/n", CgroupsPath: "/berth/x", Host: host})
		if err == nil {
			for _, r := range res.Spec.Process.Rlimits {
				if r.Hard > 1024 && r.Type == "RLIMIT_NOFILE" {
					t.Fatalf("nofile hard %d above the engine's 1024", r.Hard)
				}
			}
			if len(res.Spec.Process.Args) == 0 {
				t.Fatal("spec without a process")
			}
			return
		}
		var fe *core.FieldError
		var pe *os.PathError
		if !errors.As(err, &fe) && !errors.As(err, &pe) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if _, err := HostsFile(&spec, "h", "n", "10.0.0.1"); err != nil && !errors.As(err, &fe) {
			t.Fatalf("hosts file error without a field: %v", err)
		}
	})
}
