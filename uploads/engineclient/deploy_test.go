package engineclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// opener yields s afresh on every call.
func opener(s string) Opener {
	return func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil }
}

func TestInstallQuadlets(t *testing.T) {
	var gotMethod, gotPath, gotQuery, gotType, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		gotMethod, gotPath, gotQuery, gotType, gotBody = r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"InstalledQuadlets":{"web.container":"/q/web/web.container"},"QuadletErrors":{}}`)
	}))
	defer srv.Close()
	report, err := newTestClient(t, srv.URL).InstallQuadlets(context.Background(), opener("tar bytes"), QuadletInstallOptions{Replace: true, Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	if report.Installed["web.container"] != "/q/web/web.container" || len(report.Errors) != 0 {
		t.Errorf("report = %+v", report)
	}
	if gotMethod != http.MethodPost || gotPath != "/v4.0.0/libpod/quadlets" || gotQuery != "activate=true&replace=true" || gotType != "application/x-tar" || gotBody != "tar bytes" {
		t.Errorf("request = %s %s?%s (%s) %q", gotMethod, gotPath, gotQuery, gotType, gotBody)
	}
	if _, err := newTestClient(t, srv.URL).InstallQuadlets(context.Background(), opener("x"), QuadletInstallOptions{}); err != nil || gotQuery != "" {
		t.Errorf("without options: query %q, err %v", gotQuery, err)
	}
}

func TestKubePlay(t *testing.T) {
	var gotPath, gotQuery, gotType, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		gotPath, gotQuery, gotType, gotBody = r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"Pods":[{"ID":"p1","Containers":["c1"],"InitContainers":null,"Logs":null,"ContainerErrors":["c2: boom"]}],"Volumes":[{"Name":"v"}],"RmReport":null,"StopReport":null}`)
	}))
	defer srv.Close()
	report, err := newTestClient(t, srv.URL).KubePlay(context.Background(), opener("kind: Pod\n"), KubePlayOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Pods) != 1 || report.Pods[0].ID != "p1" || report.Pods[0].ContainerErrors[0] != "c2: boom" || report.Volumes[0].Name != "v" {
		t.Errorf("report = %+v", report)
	}
	if gotPath != "/v4.0.0/libpod/kube/play" || gotQuery != "replace=true" || gotType != "application/yaml" || gotBody != "kind: Pod\n" {
		t.Errorf("request = %s?%s (%s) %q", gotPath, gotQuery, gotType, gotBody)
	}
}

// Refusals keep the engine's status and message; a dropped connection is retried with
// the body opened again.
func TestDeployCallsErrorsAndRetries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"cause":"bad unit","message":"web.container line 1: bad unit","response":400}`)
	}))
	defer srv.Close()
	client := newTestClient(t, srv.URL)
	_, err := client.InstallQuadlets(context.Background(), opener("x"), QuadletInstallOptions{})
	var apiErr *Error
	if !errors.As(err, &apiErr) || !errors.Is(err, ErrBadRequest) || apiErr.Message != "web.container line 1: bad unit" || apiErr.Op != "POST /quadlets" {
		t.Errorf("install refused: err = %v", err)
	}
	_, err = client.KubePlay(context.Background(), opener("x"), KubePlayOptions{})
	if !errors.As(err, &apiErr) || !errors.Is(err, ErrBadRequest) || apiErr.Op != "POST /kube/play" {
		t.Errorf("play refused: err = %v", err)
	}

	flaky, requests, bodies := flakyServer(t, 1, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"Pods":[]}`)
	})
	defer flaky.Close()
	if _, err := newTestClient(t, flaky.URL).KubePlay(context.Background(), opener("kind: Pod\n"), KubePlayOptions{}); err != nil {
		t.Fatalf("play after a dropped connection: %v", err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	for i := 0; i < 2; i++ {
		if got := string(<-bodies); got != "kind: Pod\n" {
			t.Errorf("body of attempt %d = %q", i+1, got)
		}
	}
}
