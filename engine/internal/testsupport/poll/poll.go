// Package poll holds the tests' waiting for what happens a moment later
// (a container's exit recorded, a port answering, a cgroup removed):
// polling a condition until it holds or a time limit passes. It imports
// nothing of the engine, so that every test, unit or integration, can
// use it.
package poll

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// Interval is how long Within and Until sleep between two checks.
const Interval = 50 * time.Millisecond

// Within checks cond every Interval until it holds (true) or d has passed
// (false); cond runs at least once, and once more at the limit.
func Within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(Interval) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Until fails t unless cond holds within d (see Within); what names the
// awaited event in the failure.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("%s: not within %v", what, d)
	}
}

// Get sends one GET to url (what a container serves on a published port,
// say), waiting 2 seconds at most, and answers the body of a 200 answer;
// "" for any other answer, an empty body or no answer.
func Get(url string) string {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(data)
}

// GetWithin polls Get until url answers within d and answers the body; it
// fails t, naming url, otherwise.
func GetWithin(t testing.TB, d time.Duration, url string) string {
	t.Helper()
	var body string
	Until(t, d, "GET "+url+" answering 200", func() bool {
		body = Get(url)
		return body != ""
	})
	return body
}
