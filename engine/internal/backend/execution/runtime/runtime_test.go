package runtime

import "testing"

func TestCleanRuntimeMessage(t *testing.T) {
	tests := map[string]string{
		`time="2026-11-22T00:14:54Z" level=error msg="runc create failed: exec: \"/x\": stat /x: no such file or directory"`: `runc create failed: exec: "/x": stat /x: no such file or directory`,
		`{"level":"error","msg":"container_linux.go: starting failed","time":"x"}`:                                           "container_linux.go: starting failed",
		"plain failure\n": "plain failure",
		"":                "the OCI runtime failed to create the container",
	}
	for in, want := range tests {
		if got := cleanRuntimeMessage(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
