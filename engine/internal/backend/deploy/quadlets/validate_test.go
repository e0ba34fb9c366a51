package quadlets

import (
	"strconv"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestValidate is the rule table: which units pass, and for the others the
// line, section and key the error names.
func TestValidate(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	cases := []struct {
		name, file, unit string
		// want is empty for a valid unit, else "LINE SECTION KEY reason-substring".
		want []string
	}{
		{"container", "web.container", "[Unit]\nDescription=web\n[Container]\nImage=busybox\nExec=sleep 1\nPublishPort=8080:80\nPublishPort=127.0.0.1:8081:80/udp\nReadOnly=yes\n[Service]\nRestart=always\n[Install]\nWantedBy=default.target\n", nil},
		{"continuation", "web.container", "[Container]\nImage=busybox\nExec=sleep \\\n  10\nLabel=a=b\n", nil},
		{"pod", "db.pod", "[Pod]\nPodName=db\nPublishPort=5432:5432\n", nil},
		{"volume", "data.volume", "[Volume]\nVolumeName=data\nCopy=false\n", nil},
		{"network", "net.network", "[Network]\nSubnet=10.89.0.0/24\nInternal=true\n", nil},
		{"kube", "app.kube", "[Kube]\nYaml=app.yaml\n", nil},
		{"image", "bb.image", "[Image]\nImage=docker.io/library/busybox\nAllTags=no\n", nil},
		{"build", "app.build", "[Build]\nImageTag=localhost/app\nFile=Containerfile\n", nil},
		{"quadlet section", "web.container", "[Quadlet]\nDefaultDependencies=false\n[Container]\nImage=busybox\n", nil},
		{"x section", "web.container", "[X-Container]\nAnything=goes\n[Container]\nImage=busybox\n", nil},
		{"unknown key", "web.container", "[Container]\nImage=busybox\nImagee=x\n", []string{"3 Container Imagee unsupported key"}},
		{"key of another kind", "data.volume", "[Volume]\nImage=x\nExec=sleep\n", []string{"3 Volume Exec unsupported key"}},
		{"bad boolean", "web.container", "[Container]\nImage=busybox\nReadOnly=maybe\n", []string{"3 Container ReadOnly not a boolean"}},
		{"bad integer", "web.container", "[Container]\nImage=busybox\nStopTimeout=soon\n", []string{"3 Container StopTimeout non-negative integer"}},
		{"bad port", "web.container", "[Container]\nImage=busybox\nPublishPort=eighty\n", []string{"3 Container PublishPort port mapping"}},
		{"bad pod", "web.container", "[Container]\nImage=busybox\nPod=db.container\n", []string{"3 Container Pod .pod quadlet"}},
		{"pod restart", "db.pod", "[Pod]\n[Service]\nRestart=always\n", nil},
		{"bad restart", "db.pod", "[Pod]\n[Service]\nRestart=sometimes\n", []string{"3 Service Restart not a systemd restart setting"}},
		{"service user", "web.container", "[Container]\nImage=busybox\n[Service]\nUser=nobody\n", []string{"4 Service User not supported"}},
		{"no image", "web.container", "[Container]\nExec=sleep\n", []string{"0 Container - no Image or Rootfs"}},
		{"image and rootfs", "web.container", "[Container]\nImage=a\nRootfs=/x\n", []string{"0 Container - cannot be specified together"}},
		{"kube without yaml", "app.kube", "[Kube]\n", []string{"0 Kube - no Yaml key"}},
		{"build without file", "app.build", "[Build]\nImageTag=x\n", []string{"0 Build - neither SetWorkingDirectory nor File"}},
		{"image driver", "v.volume", "[Volume]\nDriver=image\n", []string{"0 Volume - Image is mandatory"}},
		{"two errors", "web.container", "[Container]\nImage=x\nFoo=1\nBar=2\n", []string{"3 Container Foo unsupported", "4 Container Bar unsupported"}},
		{"garbage line", "web.container", "[Container]\nImage=x\nnot a key\n", []string{"3 - - unit syntax"}},
		{"key before section", "web.container", "Image=x\n", []string{"1 - - unit syntax"}},
		{"unclosed section", "web.container", "[Container\nImage=x\n", []string{"1 - - unit syntax"}},
		{"unknown extension", "web.service", "[Service]\nExecStart=/bin/true\n", []string{"0 - - not a supported quadlet file type"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(tc.file, []byte(tc.unit))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d %v", len(errs), errs, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				f := strings.SplitN(want, " ", 4)
				e := errs[i]
				got := []string{itoa(e.Line), dash(e.Section), dash(e.Key)}
				if got[0] != f[0] || got[1] != f[1] || got[2] != f[2] || !strings.Contains(e.Error(), f[3]) {
					t.Errorf("error %d = %q (line %s section %s key %s), want %q", i, e, got[0], got[1], got[2], want)
				}
				if !strings.HasPrefix(e.Error(), tc.file) {
					t.Errorf("error %q does not name the file %s", e, tc.file)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FuzzValidate feeds arbitrary unit text to the validator: it must not
// panic, every error must name the file, and a line it names must exist.
func FuzzValidate(f *testing.F) {
	f.Add(".container", "[Container]\nImage=busybox\nExec=sleep 1\n")
	f.Add(".volume", "[Volume]\nDriver=image\nImage=x\n")
	f.Add(".container", "[Container]\nImage=a \\\n b\nReadOnly=maybe\n")
	f.Add(".build", "[Build\nImageTag=x\n")
	f.Fuzz(func(t *testing.T, ext, unit string) {
		name := "fuzz" + ext
		lines := strings.Count(unit, "\n") + 1
		for _, e := range Validate(name, []byte(unit)) {
			if !strings.HasPrefix(e.Error(), name) {
				t.Fatalf("error %q does not name %s", e, name)
			}
			if e.Line < 0 || e.Line > lines {
				t.Fatalf("error %q names line %d of %d", e, e.Line, lines)
			}
		}
	})
}
