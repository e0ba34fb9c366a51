package dockerapi

import "testing"

// TestDockerTLSVerify: dockerd's default insecure registries are the
// loopback ones; every other registry follows registries.conf.
func TestDockerTLSVerify(t *testing.T) {
	for ref, insecure := range map[string]bool{
		"127.0.0.1:5000/app:1":          true,
		"127.0.0.2:5000/team/app:1":     true,
		"localhost:5000/app:1":          true,
		"localhost/app:1":               true,
		"[::1]:5000/app:1":              true,
		"docker://127.0.0.1:5000/app:1": true,
		"quay.io/org/app:1":             false,
		"10.0.0.1:5000/app:1":           false,
		"library/busybox":               false,
		"busybox:1":                     false,
		"localhostish.example/app":      false,
	} {
		got := dockerTLSVerify(ref)
		if insecure != (got != nil && !*got) {
			t.Errorf("%s: %v, want insecure %v", ref, got, insecure)
		}
	}
}
