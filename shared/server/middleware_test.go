package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/shared/syncbuf"
)

var (
	_ http.Flusher  = (*responseRecorder)(nil)
	_ http.Hijacker = (*responseRecorder)(nil)
	_ io.ReaderFrom = (*responseRecorder)(nil)
)

// logRecords returns the JSON log records written so far.
func logRecords(t *testing.T, b *syncbuf.Buffer) []map[string]any {
	t.Helper()
	var records []map[string]any
	for _, line := range b.Lines() {
		var record map[string]any
		if err := json.Unmarshal([]byte(line), &record); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		records = append(records, record)
	}
	return records
}

// fullChain wraps h in every middleware of this package, in the order the
// services use them.
func fullChain(logger *slog.Logger, metrics *Metrics, h http.Handler) http.Handler {
	onPanic := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
	return RequestID(AccessLog(logger)(Recover(logger, onPanic)(metrics.Middleware(h))))
}

func TestRequestID(t *testing.T) {
	var seen string
	h := RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = RequestIDFrom(r.Context())
	}))
	generated := regexp.MustCompile(`^[0-9a-f]{32}$`)
	tests := []struct {
		name     string
		incoming string
		keep     bool
	}{
		{"client id kept", "req-42.abc_DEF", true},
		{"none sent", "", false},
		{"with space", "two words", false},
		{"control char", "a\x01b", false},
		{"non-ascii", "ünï", false},
		{"too long", strings.Repeat("x", 129), false},
		{"longest kept", strings.Repeat("x", 128), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.incoming != "" {
				req.Header.Set(RequestIDHeader, tt.incoming)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := rec.Header().Get(RequestIDHeader)
			if got != seen {
				t.Fatalf("header %q but context %q", got, seen)
			}
			if tt.keep && got != tt.incoming {
				t.Fatalf("id %q, want the client's %q", got, tt.incoming)
			}
			if !tt.keep && !generated.MatchString(got) {
				t.Fatalf("id %q, want a generated one", got)
			}
		})
	}
	first, second := httptest.NewRecorder(), httptest.NewRecorder()
	h.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/", nil))
	h.ServeHTTP(second, httptest.NewRequest(http.MethodGet, "/", nil))
	if first.Header().Get(RequestIDHeader) == second.Header().Get(RequestIDHeader) {
		t.Fatal("two requests got the same generated id")
	}
	if RequestIDFrom(httptest.NewRequest(http.MethodGet, "/", nil).Context()) != "" {
		t.Fatal("RequestIDFrom without RequestID is not empty")
	}
}

func TestRecoverAnswersAndKeepsServing(t *testing.T) {
	var logs syncbuf.Buffer
	logger := NewLogger(&logs, "json", slog.LevelInfo)
	router := chi.NewRouter()
	router.Get("/panic", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Half-Done", "yes")
		panic("handler bug")
	})
	router.Get("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fine") })
	onPanic := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"cause":"panic","message":"internal error","response":500}`)
	}
	srv := httptest.NewServer(RequestID(Recover(logger, onPanic)(router)))
	defer srv.Close()

	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/panic", nil)
		req.Header.Set(RequestIDHeader, fmt.Sprintf("panic-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 500 || string(body) != `{"cause":"panic","message":"internal error","response":500}` {
			t.Fatalf("panic answered %d %q, want the onPanic response", resp.StatusCode, body)
		}
		resp, err = http.Get(srv.URL + "/ok")
		if err != nil {
			t.Fatalf("server stopped serving after a panic: %v", err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "fine" {
			t.Fatalf("after panic: %q", body)
		}
	}
	records := logRecords(t, &logs)
	if len(records) != 3 {
		t.Fatalf("%d log records, want one per panic: %v", len(records), records)
	}
	rec := records[0]
	if rec["msg"] != "panic in handler" || rec["panic"] != "handler bug" || rec["request_id"] != "panic-0" ||
		rec["path"] != "/panic" || !strings.Contains(fmt.Sprint(rec["stack"]), "middleware_test.go") {
		t.Fatalf("panic log record %v", rec)
	}
}

func TestRecoverDefaultAnswer(t *testing.T) {
	h := Recover(nil, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic(errors.New("boom")) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "Internal Server Error") {
		t.Fatalf("got %d %q", rec.Code, rec.Body)
	}
}

func TestRecoverAbortsStartedResponse(t *testing.T) {
	var logs syncbuf.Buffer
	logger := NewLogger(&logs, "json", slog.LevelInfo)
	h := Recover(logger, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "partial")
		w.(http.Flusher).Flush()
		panic("midway")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("truncated response read as complete: %q", body)
	}
	if string(body) != "partial" {
		t.Fatalf("body %q", body)
	}
	if records := logRecords(t, &logs); len(records) != 1 || records[0]["panic"] != "midway" {
		t.Fatalf("log %v", records)
	}
}

func TestRecoverPassesErrAbortHandler(t *testing.T) {
	var logs syncbuf.Buffer
	h := Recover(NewLogger(&logs, "json", slog.LevelInfo), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	defer func() {
		if recovered := recover(); recovered != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler passed on", recovered)
		}
		if records := logRecords(t, &logs); len(records) != 0 {
			t.Fatalf("ErrAbortHandler was logged: %v", records)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
}

func TestAccessLog(t *testing.T) {
	var logs syncbuf.Buffer
	logger := NewLogger(&logs, "json", slog.LevelInfo)
	router := chi.NewRouter()
	router.Get("/v1/uploads/{uuid}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprint(w, "12345")
	})
	router.Get("/implicit", func(w http.ResponseWriter, r *http.Request) {})
	router.Get("/panic", func(w http.ResponseWriter, r *http.Request) { panic("x") })
	h := RequestID(Recover(logger, nil)(AccessLog(logger)(router)))

	for _, path := range []string{"/v1/uploads/abc", "/implicit", "/nowhere", "/panic"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set(RequestIDHeader, "id"+strings.ReplaceAll(path, "/", "-"))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	var access []map[string]any
	for _, rec := range logRecords(t, &logs) {
		if rec["msg"] == "request" {
			access = append(access, rec)
		}
	}
	want := []struct {
		path     string
		status   float64
		bytes    float64
		panicked bool
	}{
		{"/v1/uploads/abc", 418, 5, false},
		{"/implicit", 200, 0, false},
		{"/nowhere", 404, 19, false},
		{"/panic", 500, 0, true},
	}
	if len(access) != len(want) {
		t.Fatalf("%d access records, want %d: %v", len(access), len(want), access)
	}
	for i, w := range want {
		rec := access[i]
		if rec["path"] != w.path || rec["status"] != w.status || rec["bytes"] != w.bytes || rec["method"] != "GET" ||
			rec["request_id"] != "id"+strings.ReplaceAll(w.path, "/", "-") || (rec["panicked"] == true) != w.panicked {
			t.Errorf("access record %v, want %+v", rec, w)
		}
		if _, ok := rec["duration"]; !ok {
			t.Errorf("access record %v has no duration", rec)
		}
	}
}

func TestHijackThroughFullChain(t *testing.T) {
	var logs syncbuf.Buffer
	logger := NewLogger(&logs, "json", slog.LevelInfo)
	metrics := NewMetrics("berth_test")
	router := chi.NewRouter()
	router.Post("/containers/{name}/attach", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		fmt.Fprint(buf, "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		buf.Flush()
		line, err := buf.ReadString('\n')
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "echo: %s", line)
		buf.Flush()
	})
	srv := httptest.NewServer(fullChain(logger, metrics, router))
	defer srv.Close()

	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "POST /containers/web/attach?stream=true HTTP/1.1\r\nHost: berth\r\nUpgrade: tcp\r\nConnection: Upgrade\r\nContent-Length: 0\r\n\r\n")
	reader := bufio.NewReader(conn)
	resp, err := http.ReadResponse(reader, nil)
	if err != nil {
		t.Fatalf("reading upgrade response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	fmt.Fprint(conn, "hello container\n")
	line, err := reader.ReadString('\n')
	if err != nil || line != "echo: hello container\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
	conn.Close()

	// The request is logged and counted as hijacked once its handler returns.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(scrape(t, metrics), `berth_test_http_requests_total{code="hijacked",method="POST",route="/containers/{name}/attach"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("hijacked request not counted:\n%s", scrape(t, metrics))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The access log is written by another layer of the chain than the
	// one counting the request: it may come a moment later.
	hijackLogged := func() bool {
		for _, rec := range logRecords(t, &logs) {
			if rec["msg"] == "request" && rec["hijacked"] == true && rec["path"] == "/containers/web/attach" {
				return true
			}
		}
		return false
	}
	for !hijackLogged() {
		if time.Now().After(deadline) {
			t.Fatalf("no hijacked access record in %v", logRecords(t, &logs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStreamingFlushesThroughFullChain(t *testing.T) {
	metrics := NewMetrics("berth_test")
	received := make(chan struct{})
	router := chi.NewRouter()
	router.Get("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"n":1}`)
		w.(http.Flusher).Flush()
		select {
		case <-received:
		case <-time.After(5 * time.Second):
			fmt.Fprintln(w, `{"timeout":"first line never reached the client"}`)
			return
		}
		fmt.Fprintln(w, `{"n":2}`)
		if err := http.NewResponseController(w).Flush(); err != nil {
			fmt.Fprintln(w, `{"flush error":true}`)
		}
	})
	srv := httptest.NewServer(fullChain(slog.New(slog.DiscardHandler), metrics, router))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	reader := bufio.NewReader(resp.Body)
	first, err := reader.ReadString('\n')
	if err != nil || first != "{\"n\":1}\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	close(received)
	rest, err := io.ReadAll(reader)
	if err != nil || string(rest) != "{\"n\":2}\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestResponseControllerThroughWrappers(t *testing.T) {
	metrics := NewMetrics("berth_test")
	errs := make(chan error, 1)
	h := fullChain(slog.New(slog.DiscardHandler), metrics, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		errs <- errors.Join(rc.SetWriteDeadline(time.Now().Add(time.Minute)), rc.SetReadDeadline(time.Now().Add(time.Minute)), rc.EnableFullDuplex())
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-errs; err != nil {
		t.Fatalf("ResponseController through the middleware: %v", err)
	}
}

func TestHijackUnsupportedIsAnError(t *testing.T) {
	got := make(chan error, 1)
	h := fullChain(slog.New(slog.DiscardHandler), NewMetrics("berth_test"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, err := w.(http.Hijacker).Hijack()
		got <- err
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if err := <-got; !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("Hijack on a writer that cannot: %v, want http.ErrNotSupported", err)
	}
}

// codesWriter records every WriteHeader call, as net/http's own writer
// accepts 1xx codes before the final one.
type codesWriter struct {
	header http.Header
	codes  []int
	body   bytes.Buffer
}

func (w *codesWriter) Header() http.Header         { return w.header }
func (w *codesWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
func (w *codesWriter) WriteHeader(code int)        { w.codes = append(w.codes, code) }

func TestRecorderInformationalStatus(t *testing.T) {
	inner := &codesWriter{header: http.Header{}}
	rec := newRecorder(inner)
	rec.WriteHeader(http.StatusEarlyHints)
	if rec.wroteHeader {
		t.Fatal("103 counted as the final status")
	}
	rec.WriteHeader(http.StatusCreated)
	fmt.Fprint(rec, "abc")
	if rec.Status() != http.StatusCreated || rec.bytes != 3 || !reflect.DeepEqual(inner.codes, []int{103, 201}) {
		t.Fatalf("status %d bytes %d inner codes %v", rec.Status(), rec.bytes, inner.codes)
	}
	if rec.Unwrap() != inner {
		t.Fatal("Unwrap does not return the wrapped writer")
	}

	upgraded := newRecorder(&codesWriter{header: http.Header{}})
	upgraded.WriteHeader(http.StatusSwitchingProtocols)
	if upgraded.Status() != http.StatusSwitchingProtocols {
		t.Fatalf("101 not recorded as final: %d", upgraded.Status())
	}
}

func TestFileDownloadThroughFullChain(t *testing.T) {
	var logs syncbuf.Buffer
	content := bytes.Repeat([]byte("0123456789abcdef"), 64*1024)
	path := t.TempDir() + "/layer.tar"
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	h := fullChain(NewLogger(&logs, "json", slog.LevelInfo), NewMetrics("berth_test"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		file, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer file.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		io.Copy(w, file)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/export")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("downloaded %d bytes (%v), want %d identical bytes", len(got), err, len(content))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		records := logRecords(t, &logs)
		if len(records) == 1 {
			if records[0]["bytes"] != float64(len(content)) || records[0]["status"] != float64(200) {
				t.Fatalf("access record %v, want %d bytes, status 200", records[0], len(content))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("access records %v", records)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAccessLogProbesAtDebug: probes answered without an error do not log
// a line each at info (before: every _ping and /healthz did); a failing
// probe and other requests still do, and at debug level probes are logged.
func TestAccessLogProbesAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelInfo, []string{"/readyz", "/v1/uploads"}},
		{slog.LevelDebug, []string{"/_ping", "/v4.3.1/libpod/_ping", "/healthz", "/metrics", "/readyz", "/v1/uploads"}},
	} {
		var logs syncbuf.Buffer
		logger := NewLogger(&logs, "json", tc.level)
		router := chi.NewRouter()
		for _, p := range []string{"/_ping", "/v4.3.1/libpod/_ping", "/healthz", "/metrics", "/v1/uploads"} {
			router.Get(p, func(w http.ResponseWriter, r *http.Request) {})
		}
		router.Get("/readyz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
		h := AccessLog(logger)(router)
		for _, p := range []string{"/_ping", "/v4.3.1/libpod/_ping", "/healthz", "/metrics", "/readyz", "/v1/uploads"} {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
		}
		var got []string
		for _, rec := range logRecords(t, &logs) {
			if rec["msg"] == "request" {
				got = append(got, rec["path"].(string))
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("at %v logged %v, want %v", tc.level, got, tc.want)
		}
	}
}

// TestReferenceID: X-Reference-Id echoes the client's when it is valid, and
// is otherwise the request id, so it is on every response.
func TestReferenceID(t *testing.T) {
	var seen string
	h := RequestID(ReferenceID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get(ReferenceIDHeader)
	})))
	tests := []struct {
		name, reference, request string
		want                     string
	}{
		{"client reference echoed", "ref-1", "req-1", "ref-1"},
		{"none: the request id", "", "req-2", "req-2"},
		{"invalid: the request id", "two words", "req-3", "req-3"},
		{"too long: the request id", strings.Repeat("x", 129), "req-4", "req-4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.reference != "" {
				req.Header.Set(ReferenceIDHeader, tt.reference)
			}
			req.Header.Set(RequestIDHeader, tt.request)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if got := rec.Header().Get(ReferenceIDHeader); got != tt.want || seen != tt.want {
				t.Fatalf("X-Reference-Id %q (handler saw %q), want %q", got, seen, tt.want)
			}
		})
	}
	rec := httptest.NewRecorder()
	ReferenceID(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if got := rec.Header().Get(ReferenceIDHeader); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got) {
		t.Fatalf("without RequestID: X-Reference-Id %q, want a generated one", got)
	}
}

// TestRequestIDTwice: a RequestID behind another keeps the id the first
// chose, so a guard in front of the router and the router log the same id.
func TestRequestIDTwice(t *testing.T) {
	var seen string
	h := RequestID(RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = RequestIDFrom(r.Context())
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if got := rec.Header().Get(RequestIDHeader); got == "" || got != seen {
		t.Fatalf("response id %q, handler saw %q", got, seen)
	}
}
