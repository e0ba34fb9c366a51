package systemapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/testimage"
	"github.com/berth-project/berth/shared/apierror"
)

// errorBody decodes an engine error body and checks it carries status.
func errorBody(t *testing.T, what string, status int, body []byte, want int) apierror.EngineError {
	t.Helper()
	var e apierror.EngineError
	if status != want {
		t.Errorf("%s: status %d, want %d: %s", what, status, want, body)
		return e
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Response != want || e.Message == "" || e.Cause == "" {
		t.Errorf("%s: %d body %q is not the engine error body for %d", what, status, body, want)
	}
	return e
}

// TestExistsRoutesAnswer404WithBody walks every exists route of Podman's
// API: an unknown object is 404 with the JSON error body, which Podman's
// clients decode (whether the group is implemented or not).
func TestExistsRoutesAnswer404WithBody(t *testing.T) {
	te := startEngine(t)
	for _, prefix := range []string{"/v4.3.1/libpod", "/libpod", "/v5.0.0/libpod"} {
		for _, group := range []string{"containers", "images", "volumes", "networks", "pods", "secrets", "manifests", "quadlets"} {
			for _, name := range []string{"berth-no-such-object", "UPPER%20case"} {
				path := prefix + "/" + group + "/" + name + "/exists"
				status, body := enginetest4Path(te, "GET", path)
				errorBody(t, "GET "+path, status, body, http.StatusNotFound)
			}
		}
	}
}

// TestRoutesNotServedAreNoSuchRoute: a route the engine does not serve
// answers 404 "no such route" with the error body, also when its path
// looks like a parameter of a route it serves (GET /volumes/search against
// DELETE /volumes/{name}); a served path called with the wrong method is 405.
func TestRoutesNotServedAreNoSuchRoute(t *testing.T) {
	te := startEngine(t)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v4.3.1/libpod/volumes/search?term=busybox", http.StatusNotFound},
		{"GET", "/libpod/volumes/search", http.StatusNotFound},
		{"GET", "/v4.3.1/libpod/no/such/route", http.StatusNotFound},
		{"PUT", "/v4.3.1/libpod/images/a/b/c", http.StatusNotFound},
		{"GET", "/v4.3.1/libpod/containers/create", http.StatusMethodNotAllowed},
		{"PUT", "/v4.3.1/libpod/images/json", http.StatusMethodNotAllowed},
	} {
		status, body := enginetest4Path(te, tc.method, tc.path)
		e := errorBody(t, tc.method+" "+tc.path, status, body, tc.status)
		if tc.status == http.StatusNotFound && e.Cause != "no such route" {
			t.Errorf("%s %s: cause %q, want no such route", tc.method, tc.path, e.Cause)
		}
	}
}

// TestBadQueryValuesAre400 sends each route a malformed value of each kind
// of parameter it takes: a boolean that is not one, filters that are not
// JSON, a filter name the route does not know, a format it does not know,
// a number or duration that is not one. Every answer is 400 naming the
// parameter: never a 500, never ignored.
func TestBadQueryValuesAre400(t *testing.T) {
	te := startEngine(t)
	te.Load(testimage.Busybox("localhost/busybox:latest", "sh"))
	ctr := te.Create(map[string]any{"image": "localhost/busybox:latest", "name": "q-ctr", "command": []string{"true"}})
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "q-vol"})
	bogus := filters(map[string][]string{"bogus": {"x"}})
	cases := []struct{ method, path, param string }{
		{"GET", "/containers/json?all=maybe", "all"},
		{"GET", "/containers/json?size=maybe", "size"},
		{"GET", "/containers/json?limit=ten", "limit"},
		{"GET", "/containers/json?filters=notjson", "filters"},
		{"GET", "/containers/json?filters=" + bogus, "filters"},
		{"POST", "/containers/prune?filters=notjson", "filters"},
		{"POST", "/containers/prune?filters=" + bogus, "filters"},
		{"GET", "/containers/" + ctr + "/json?size=maybe", "size"},
		{"POST", "/containers/" + ctr + "/stop?timeout=soon", "timeout"},
		{"POST", "/containers/" + ctr + "/restart?timeout=soon", "timeout"},
		{"POST", "/containers/" + ctr + "/wait?condition=bogus", "condition"},
		{"GET", "/containers/" + ctr + "/logs?follow=maybe&stdout=true", "follow"},
		{"GET", "/containers/" + ctr + "/logs?stdout=maybe", "stdout"},
		{"DELETE", "/containers/" + ctr + "?force=maybe", "force"},
		{"DELETE", "/containers/" + ctr + "?v=maybe", "v"},
		{"GET", "/containers/stats?stream=maybe", "stream"},
		{"GET", "/images/json?all=maybe", "all"},
		{"GET", "/images/json?filters=notjson", "filters"},
		{"GET", "/images/json?filters=" + bogus, "filters"},
		{"POST", "/images/prune?all=maybe", "all"},
		{"POST", "/images/prune?filters=" + bogus, "filters"},
		{"GET", "/images/busybox/tree?whatrequires=maybe", "whatrequires"},
		{"DELETE", "/images/busybox?force=maybe", "force"},
		{"DELETE", "/images/remove?images=busybox&all=maybe", "all"},
		{"GET", "/images/busybox/get?format=bogus", "format"},
		{"GET", "/images/busybox/get?compress=maybe", "compress"},
		{"GET", "/images/export?references=busybox&format=bogus", "format"},
		{"POST", "/images/pull?reference=localhost/x:1&quiet=maybe", "quiet"},
		{"POST", "/images/pull?reference=localhost/x:1&tlsVerify=maybe", "tlsVerify"},
		{"POST", "/images/pull?reference=localhost/x:1&allTags=maybe", "allTags"},
		{"POST", "/images/pull?reference=localhost/x:1&policy=bogus", "policy"},
		{"POST", "/images/busybox/push?destination=127.0.0.1:1/x&format=bogus", "format"},
		{"POST", "/images/busybox/push?destination=127.0.0.1:1/x&tlsVerify=maybe", "tlsVerify"},
		{"GET", "/volumes/json?filters=notjson", "filters"},
		{"GET", "/volumes/json?filters=" + bogus, "filters"},
		{"POST", "/volumes/prune?filters=" + bogus, "filters"},
		{"DELETE", "/volumes/q-vol?force=maybe", "force"},
		{"GET", "/events?stream=maybe", "stream"},
		{"GET", "/events?stream=false&filters=notjson", "filters"},
		{"GET", "/events?stream=false&filters=" + bogus, "filters"},
		{"GET", "/events?stream=false&since=yesterday", "since"},
		{"GET", "/events?stream=false&until=tomorrow", "until"},
		{"POST", "/system/prune?all=maybe", "all"},
		{"POST", "/system/prune?filters=" + bogus, "filters"},
		{"POST", "/system/check?quick=maybe", "quick"},
		{"POST", "/system/check?repair=maybe", "repair"},
		{"POST", "/system/check?unreferenced_layer_max_age=old", "unreferenced_layer_max_age"},
	}
	for _, tc := range cases {
		status, body := te.Do(tc.method, tc.path, nil)
		e := errorBody(t, tc.method+" "+tc.path, status, body, http.StatusBadRequest)
		if e.Message != "" && !strings.Contains(strings.ToLower(e.Message), strings.ToLower(tc.param)) {
			t.Errorf("%s %s: message %q does not name %s", tc.method, tc.path, e.Message, tc.param)
		}
	}
}
