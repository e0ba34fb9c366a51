package processor

import "testing"

func TestFileKind(t *testing.T) {
	for rel, want := range map[string]string{
		"a/img.tar": "image-archive", "IMG.TAR.GZ": "image-archive", "x.tgz": "image-archive",
		"app.container": "quadlet", "u/web.pod": "quadlet", "d.build": "quadlet",
		"k.yaml": "kube", "K.YML": "kube",
		"readme.txt": "other", ".tar": "image-archive", "noext": "other",
	} {
		if got := FileKind(rel); got != want {
			t.Errorf("FileKind(%q) = %q, want %q", rel, got, want)
		}
	}
}
