package dockercli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
)

// TestDockerLogin: docker login asks the registry, as dockerd does: the
// right password succeeds, a wrong one or an unknown user fails with the
// registry's refusal, and a registry that does not answer fails too.
func TestDockerLogin(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "berth", Password: "s3cret"})
	te := startEngine(t)
	login := func(user, password, host string) (string, error) {
		out, errOut, err := te.exec(bytes.NewBufferString(password), "docker", "login", "-u", user, "--password-stdin", host)
		return out + errOut, err
	}
	if out, err := login("berth", "s3cret", reg.Host); err != nil || !strings.Contains(out, "Login Succeeded") {
		t.Fatalf("login with the right password: %v\n%s", err, out)
	}
	for _, tc := range []struct{ user, password string }{{"berth", "wrong"}, {"nobody", "s3cret"}} {
		out, err := login(tc.user, tc.password, reg.Host)
		if err == nil || !strings.Contains(out, "unauthorized") {
			t.Errorf("login as %s/%s: %v, want a refusal naming it unauthorized:\n%s", tc.user, tc.password, err, out)
		}
	}
	if out, err := login("berth", "s3cret", "127.0.0.1:1"); err == nil || strings.Contains(out, "Login Succeeded") {
		t.Errorf("login to a port nothing listens on: %v\n%s", err, out)
	}
}
