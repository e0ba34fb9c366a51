package dockercli

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDockerCreateRefusalsAsDockerd: create refusals in dockerd's words
// (compared with dockerd 20.10 beside the engine), each creating nothing:
// a name dockerd does not take (one character too), a name in use (409
// naming the holder), a memory limit under 6 MB, more CPUs than the host
// has; a negative CPU share is refused at create (dockerd's start fails
// on it: "shares: invalid argument"). Before: the engine's own words, a
// one-character name and 100 CPUs accepted, the share shown as
// 18446744073709551611.
func TestDockerCreateRefusalsAsDockerd(t *testing.T) {
	te := startEngine(t)
	holder := strings.TrimSpace(te.run("docker", "create", "--name", "dup", "localhost/busybox:latest", "true"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "a"}, "Invalid container name (a), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed"},
		{[]string{"--name", "bad/name"}, "Invalid container name (bad/name), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed"},
		{[]string{"--name", "dup"}, `Conflict. The container name "/dup" is already in use by container "` + holder + `". You have to remove (or rename) that container to be able to reuse that name.`},
		{[]string{"--memory", "1k"}, "Minimum memory limit allowed is 6MB"},
		{[]string{"--cpus", "1000"}, "Range of CPUs is from 0.01 to "},
		{[]string{"--cpu-shares", "-5"}, "invalid CPU shares (-5)"},
	} {
		msg := te.fails("docker", append(append([]string{"create"}, c.args...), "localhost/busybox:latest", "true")...)
		if !strings.Contains(msg, c.want) {
			t.Errorf("docker create %s: %s\nwant %s", strings.Join(c.args, " "), msg, c.want)
		}
	}
	if n := strings.Count(strings.TrimSpace(te.run("docker", "ps", "-aq")), "\n") + 1; n != 1 {
		t.Fatalf("%d containers after the refused creates, want the one", n)
	}
}

// TestDockerWaitBadCondition: a wait condition dockerd does not know is a
// 400 in its words, said once (it read "invalid condition: invalid
// condition: ...").
func TestDockerWaitBadCondition(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "create", "--name", "waiter", "localhost/busybox:latest", "true")
	resp, err := http.Post("http://"+te.Addr+"/v1.44/containers/waiter/wait?condition=bogus", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.TrimSpace(string(body)) != `{"message":"invalid condition: \"bogus\""}` {
		t.Fatalf("wait?condition=bogus: %d %s", resp.StatusCode, body)
	}
}
