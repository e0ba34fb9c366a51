package containerio_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// TestStreams drives logs, attach, exec, stats, top, events, healthchecks
// and restart policies against real runc containers, sharing one engine to
// keep the run short.
func TestStreams(t *testing.T) {
	te := startEngine(t)
	t.Run("AttachForegroundRun", func(t *testing.T) { testAttachForegroundRun(t, te.with(t)) })
	t.Run("AttachTerminalDetach", func(t *testing.T) { testAttachTerminalDetach(t, te.with(t)) })
	t.Run("Logs", func(t *testing.T) { testLogs(t, te.with(t)) })
	t.Run("Exec", func(t *testing.T) { testExec(t, te.with(t)) })
	t.Run("StatsAndTop", func(t *testing.T) { testStatsAndTop(t, te.with(t)) })
	t.Run("Events", func(t *testing.T) { testEvents(t, te.with(t)) })
	t.Run("Healthcheck", func(t *testing.T) { testHealthcheck(t, te.with(t)) })
	t.Run("RestartPolicy", func(t *testing.T) { testRestartPolicy(t, te.with(t)) })
	t.Run("PodmanClient", func(t *testing.T) { testPodmanClient(t, te.with(t)) })
}

// testAttachForegroundRun is what `podman run` does in the foreground:
// attach to the created container, start it, read its output, wait.
func testAttachForegroundRun(t *testing.T, te *testEngine) {
	id := te.Create(map[string]any{"command": []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	h := te.hijack("POST", "/containers/"+id+"/attach?stream=true&stdout=true&stderr=true", nil, true)
	if h.status != http.StatusSwitchingProtocols || h.header.Get("Upgrade") != "tcp" || h.header.Get("Content-Type") != stream.RawStreamType {
		t.Fatalf("attach answered %d %v", h.status, h.header)
	}
	te.start(id)
	var stdout, stderr bytes.Buffer
	if err := stream.Demux(h.reader, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if code := te.Wait(id); code != 3 {
		t.Fatalf("exit code %d", code)
	}
	// logs=true replays what the container wrote; without stream the
	// connection ends after the replay.
	h = te.hijack("POST", "/containers/"+id+"/attach?logs=true&stream=false&stdout=true", nil, false)
	if h.status != http.StatusOK {
		t.Fatalf("logs-only attach answered %d", h.status)
	}
	stdout.Reset()
	stderr.Reset()
	if err := stream.Demux(h.reader, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "out\n" || stderr.Len() != 0 {
		t.Fatalf("replayed stdout %q stderr %q", stdout.String(), stderr.String())
	}
	// Bad requests are refused before any hijack.
	if status, _ := te.Do("POST", "/containers/"+id+"/attach?stream=false&logs=false", nil); status != http.StatusBadRequest {
		t.Fatalf("attach with neither logs nor stream: %d", status)
	}
	if status, _ := te.Do("POST", "/containers/"+id+"/attach?detachKeys=ctrl-", nil); status != http.StatusBadRequest {
		t.Fatalf("attach with bad detach keys: %d", status)
	}
	if status, _ := te.Do("POST", "/containers/nosuch/attach", nil); status != http.StatusNotFound {
		t.Fatalf("attach to unknown container: %d", status)
	}
}

// testAttachTerminalDetach attaches to a container with a terminal, types
// into it, resizes it, and detaches with the detach keys.
func testAttachTerminalDetach(t *testing.T, te *testEngine) {
	id := te.Create(map[string]any{"command": []string{"sh"}, "terminal": true, "stdin": true})
	h := te.hijack("POST", "/containers/"+id+"/attach?stream=true&stdin=true&stdout=true&stderr=true", nil, true)
	if h.status != http.StatusSwitchingProtocols {
		t.Fatalf("attach answered %d", h.status)
	}
	te.Must(http.StatusOK, "POST", "/containers/"+id+"/resize?h=21&w=77&running=true", nil)
	te.start(id)
	out := make(chan string, 1)
	go func() {
		var seen strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := h.reader.Read(buf)
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), "21 77") && strings.Contains(seen.String(), "sum=42") || err != nil {
				out <- seen.String()
				return
			}
		}
	}()
	fmt.Fprintf(h.conn, "stty size; echo sum=$((40+2))\n")
	select {
	case s := <-out:
		if !strings.Contains(s, "21 77") || !strings.Contains(s, "sum=42") {
			t.Fatalf("terminal output %q", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no terminal output")
	}
	// Ctrl-P Ctrl-Q detaches: the connection closes, the container runs on.
	h.conn.Write([]byte{16, 17})
	if _, err := io.Copy(io.Discard, h.reader); err != nil {
		t.Fatalf("connection after detach: %v", err)
	}
	var state struct{ State struct{ Status string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &state)
	if state.State.Status != "running" {
		t.Fatalf("container is %s after detach", state.State.Status)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/stop?timeout=0", nil)
}

// readLogs reads a logs response body into stdout and stderr text.
func readLogs(t *testing.T, te *testEngine, path string) (string, string) {
	t.Helper()
	resp, err := http.Get(te.url(path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	var stdout, stderr bytes.Buffer
	if err := stream.Demux(resp.Body, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String()
}

func testLogs(t *testing.T, te *testEngine) {
	id := te.Create(map[string]any{"command": []string{"sh", "-c", "echo a; echo b >&2; echo c; sleep 1; echo d"}})
	te.start(id)
	// Following ends once the container exits, with everything it wrote.
	start := time.Now()
	out, errOut := readLogs(t, te, "/containers/"+id+"/logs?follow=true&stdout=true&stderr=true")
	if out != "a\nc\nd\n" || errOut != "b\n" {
		t.Fatalf("followed stdout %q stderr %q", out, errOut)
	}
	if time.Since(start) > 15*time.Second {
		t.Fatal("follow did not end with the container")
	}
	// tail counts lines of both streams, as Podman does; the selection of
	// streams applies afterwards.
	if out, errOut := readLogs(t, te, "/containers/"+id+"/logs?stdout=true&stderr=true&tail=2"); strings.Count(out+errOut, "\n") != 2 || !strings.HasSuffix(out, "d\n") {
		t.Fatalf("tail=2: %q %q", out, errOut)
	}
	if out, errOut := readLogs(t, te, "/containers/"+id+"/logs?stdout=true&tail=1"); out != "d\n" || errOut != "" {
		t.Fatalf("tail=1 stdout only: %q %q", out, errOut)
	}
	if out, errOut := readLogs(t, te, "/containers/"+id+"/logs?stderr=true"); out != "" || errOut != "b\n" {
		t.Fatalf("stderr only: %q %q", out, errOut)
	}
	out, _ = readLogs(t, te, "/containers/"+id+"/logs?stdout=true&timestamps=true&tail=1")
	ts, text, _ := strings.Cut(out, " ")
	if _, err := time.Parse(time.RFC3339, ts); err != nil || text != "d\n" {
		t.Fatalf("timestamped line %q", out)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	if out, _ := readLogs(t, te, "/containers/"+id+"/logs?stdout=true&since="+future); out != "" {
		t.Fatalf("since the future: %q", out)
	}
	for _, bad := range []string{"?stdout=true&tail=x", "?stdout=true&since=soon", "?follow=true"} {
		if status, _ := te.Do("GET", "/containers/"+id+"/logs"+bad, nil); status != http.StatusBadRequest {
			t.Errorf("logs%s: status %d, want 400", bad, status)
		}
	}
	if status, _ := te.Do("GET", "/containers/nosuch/logs?stdout=true", nil); status != http.StatusNotFound {
		t.Errorf("logs of unknown container: %d", status)
	}
}

// execStart starts a session attached and returns its output and exit code.
func execRun(t *testing.T, te *testEngine, ctr string, cfg map[string]any, stdin string) (string, string, int) {
	t.Helper()
	var created struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+ctr+"/exec", cfg), &created)
	h := te.hijack("POST", "/exec/"+created.ID+"/start", []byte(`{"Detach":false,"Tty":false}`), false)
	if h.status != http.StatusOK {
		t.Fatalf("exec start answered %d", h.status)
	}
	if stdin != "" {
		h.conn.Write([]byte(stdin))
	}
	stream.CloseWrite(h.conn)
	var stdout, stderr bytes.Buffer
	if err := stream.Demux(h.reader, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var inspect struct {
		ExitCode      int
		Running       bool
		ProcessConfig struct {
			Entrypoint string `json:"entrypoint"`
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/exec/"+created.ID+"/json", nil), &inspect)
	if inspect.Running || inspect.ProcessConfig.Entrypoint != cfg["Cmd"].([]string)[0] {
		t.Fatalf("inspect after the stream ended: %+v", inspect)
	}
	return stdout.String(), stderr.String(), inspect.ExitCode
}

func testExec(t *testing.T, te *testEngine) {
	id := te.Create(map[string]any{"command": []string{"sleep", "600"}, "env": map[string]string{"FROMCTR": "yes"}})
	te.start(id)
	out, errOut, code := execRun(t, te, id, map[string]any{
		"Cmd": []string{"sh", "-c", "echo $FROMCTR $EXTRA $(pwd); echo oops >&2; exit 7"}, "AttachStdout": true, "AttachStderr": true,
		"Env": []string{"EXTRA=1"}, "WorkingDir": "/tmp",
	}, "")
	if out != "yes 1 /tmp\n" || errOut != "oops\n" || code != 7 {
		t.Fatalf("exec: stdout %q stderr %q code %d", out, errOut, code)
	}
	// User names resolve through the container's /etc/passwd.
	out, _, code = execRun(t, te, id, map[string]any{"Cmd": []string{"sh", "-c", "id -u; id -g"}, "AttachStdout": true, "User": "nobody"}, "")
	if out != "65534\n65534\n" || code != 0 {
		t.Fatalf("exec as nobody: %q %d", out, code)
	}
	out, _, code = execRun(t, te, id, map[string]any{"Cmd": []string{"cat"}, "AttachStdin": true, "AttachStdout": true}, "piped\n")
	if out != "piped\n" || code != 0 {
		t.Fatalf("exec with stdin: %q %d", out, code)
	}
	_, errOut, code = execRun(t, te, id, map[string]any{"Cmd": []string{"nosuchcommand"}, "AttachStdout": true, "AttachStderr": true}, "")
	if code != 127 || errOut == "" {
		t.Fatalf("missing command: code %d stderr %q", code, errOut)
	}

	// With a terminal: raw bytes both ways, the size given at start, resize.
	var ttyExec struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+id+"/exec", map[string]any{
		"Cmd": []string{"sh"}, "Tty": true, "AttachStdin": true, "AttachStdout": true,
	}), &ttyExec)
	h := te.hijack("POST", "/exec/"+ttyExec.ID+"/start", []byte(`{"Detach":false,"Tty":true,"h":17,"w":61}`), true)
	if h.status != http.StatusSwitchingProtocols {
		t.Fatalf("tty exec start answered %d", h.status)
	}
	// Type at the prompt, as a user would.
	prompt := make([]byte, 0, 512)
	for !bytes.Contains(prompt, []byte("# ")) {
		b, err := h.reader.ReadByte()
		if err != nil {
			t.Fatalf("no prompt from the tty exec: %q %v", prompt, err)
		}
		prompt = append(prompt, b)
	}
	fmt.Fprintf(h.conn, "stty size; tty; exit 5\n")
	raw, err := io.ReadAll(h.reader)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "17 61") || !strings.Contains(string(raw), "/dev/pts/") {
		t.Fatalf("tty exec output %q", raw)
	}
	var ttyInspect struct {
		ExitCode      int
		ProcessConfig struct {
			Tty bool `json:"tty"`
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/exec/"+ttyExec.ID+"/json", nil), &ttyInspect)
	if ttyInspect.ExitCode != 5 || !ttyInspect.ProcessConfig.Tty {
		t.Fatalf("tty exec inspect %+v", ttyInspect)
	}

	// Detached: 200 at once, the exit code shows up in inspect.
	var created struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+id+"/exec", map[string]any{"Cmd": []string{"sh", "-c", "sleep 0.3; exit 4"}}), &created)
	te.Must(http.StatusOK, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true})
	if status, _ := te.Do("POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true}); status != http.StatusConflict {
		t.Fatalf("second start: %d", status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var inspect struct {
			ExitCode int
			Running  bool
			Pid      int
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/exec/"+created.ID+"/json", nil), &inspect)
		if !inspect.Running && inspect.ExitCode == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("detached exec never finished: %+v", inspect)
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, tc := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", "/containers/" + id + "/exec", map[string]any{"Cmd": []string{}}, http.StatusBadRequest},
		{"POST", "/containers/" + id + "/exec", map[string]any{"Cmd": []string{"true"}, "Env": []string{"NOEQUALS"}}, http.StatusBadRequest},
		{"POST", "/containers/" + id + "/exec", strings.NewReader("{not json"), http.StatusBadRequest},
		{"POST", "/containers/" + id + "/exec", map[string]any{"Cmd": []string{"true"}, "User": "ghost"}, http.StatusBadRequest},
		{"POST", "/containers/" + id + "/exec", map[string]any{"Cmd": []string{"true"}, "User": "a:b:c"}, http.StatusBadRequest},
		{"POST", "/containers/nosuch/exec", map[string]any{"Cmd": []string{"true"}}, http.StatusNotFound},
		{"GET", "/exec/nosuch/json", nil, http.StatusNotFound},
		{"POST", "/exec/nosuch/start", map[string]any{"Detach": true}, http.StatusNotFound},
		{"POST", "/exec/" + created.ID + "/resize?h=10&w=10", nil, http.StatusConflict},
	} {
		if status, body := te.Do(tc.method, tc.path, tc.body); status != tc.want {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, status, body, tc.want)
		}
	}
	// A session of a stopped container cannot start.
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+id+"/exec", map[string]any{"Cmd": []string{"true"}}), &created)
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/stop?timeout=0", nil)
	if status, _ := te.Do("POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true}); status != http.StatusConflict {
		t.Fatalf("start in a stopped container: %d", status)
	}
	if status, _ := te.Do("POST", "/containers/"+id+"/exec", map[string]any{"Cmd": []string{"true"}}); status != http.StatusConflict {
		t.Fatalf("create in a stopped container: %d", status)
	}
}

func testStatsAndTop(t *testing.T, te *testEngine) {
	id := te.Create(map[string]any{"name": "busy", "command": []string{"sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 600"}})
	te.start(id)
	time.Sleep(500 * time.Millisecond)
	var report struct {
		Error any
		Stats []struct {
			ContainerID string
			Name        string
			CPUNano     uint64
			MemUsage    uint64
			MemLimit    uint64
			PIDs        uint64
			AvgCPU      float64
		}
	}
	body := te.Must(http.StatusOK, "GET", "/containers/stats?stream=false&containers=busy", nil)
	if err := json.Unmarshal(body, &report); err != nil {
		t.Fatalf("stats body %s: %v", body, err)
	}
	if report.Error != nil || len(report.Stats) != 1 {
		t.Fatalf("stats report %s", body)
	}
	s := report.Stats[0]
	if s.ContainerID != id || s.Name != "busy" || s.CPUNano == 0 || s.MemUsage == 0 || s.MemLimit == 0 || s.PIDs < 1 || s.AvgCPU <= 0 {
		t.Fatalf("stats %+v", s)
	}
	// Streaming sends a report per interval until the client goes.
	resp, err := http.Get(te.url("/containers/stats?stream=true&interval=1&containers=" + id))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(resp.Body)
	for i := 0; i < 2; i++ {
		if err := dec.Decode(&report); err != nil || len(report.Stats) != 1 {
			t.Fatalf("streamed report %d: %v", i, err)
		}
	}
	resp.Body.Close()
	// The per-container route answers Docker's shape.
	var docker struct {
		ID       string    `json:"id"`
		Name     string    `json:"name"`
		Read     time.Time `json:"read"`
		CPUStats struct {
			CPUUsage struct {
				TotalUsage uint64 `json:"total_usage"`
			} `json:"cpu_usage"`
			SystemUsage uint64 `json:"system_cpu_usage"`
			OnlineCPUs  uint32 `json:"online_cpus"`
		} `json:"cpu_stats"`
		MemoryStats struct {
			Usage uint64 `json:"usage"`
			Limit uint64 `json:"limit"`
		} `json:"memory_stats"`
		PidsStats struct {
			Current uint64 `json:"current"`
		} `json:"pids_stats"`
	}
	body = te.Must(http.StatusOK, "GET", "/containers/busy/stats?stream=false", nil)
	if err := json.Unmarshal(body, &docker); err != nil {
		t.Fatalf("docker stats %s: %v", body, err)
	}
	if docker.ID != id || docker.CPUStats.CPUUsage.TotalUsage == 0 || docker.CPUStats.SystemUsage == 0 || docker.CPUStats.OnlineCPUs == 0 ||
		docker.MemoryStats.Usage == 0 || docker.MemoryStats.Limit == 0 || docker.PidsStats.Current == 0 || docker.Read.IsZero() {
		t.Fatalf("docker stats %s", body)
	}
	if status, _ := te.Do("GET", "/containers/busy/stats?stream=true&one-shot=true", nil); status != http.StatusBadRequest {
		t.Fatalf("stream with one-shot: %d", status)
	}
	if status, _ := te.Do("GET", "/containers/stats?stream=false&containers=nosuch", nil); status != http.StatusNotFound {
		t.Fatalf("stats of unknown container: %d", status)
	}

	var top struct {
		Titles    []string
		Processes [][]string
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/busy/top", nil), &top)
	if strings.Join(top.Titles, ",") != "USER,PID,PPID,%CPU,ELAPSED,TTY,TIME,COMMAND" || len(top.Processes) < 1 {
		t.Fatalf("top %+v", top)
	}
	// PID 1 is the shell, or the sleep it execs at the end of its script.
	if cmd := top.Processes[0][7]; top.Processes[0][1] != "1" || !strings.HasPrefix(cmd, "sh -c") && cmd != "sleep 600" {
		t.Fatalf("first process %v", top.Processes[0])
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/busy/top?ps_args=pid,comm", nil), &top)
	if strings.Join(top.Titles, ",") != "PID,COMMAND" {
		t.Fatalf("top with descriptors %+v", top)
	}
	// Other arguments go to ps(1) in the container, lines whole.
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/busy/top?ps_args=-o,pid,args", nil), &top)
	if len(top.Titles) != 1 || !strings.Contains(top.Titles[0], "PID") || len(top.Processes) < 1 || len(top.Processes[0]) != 1 {
		t.Fatalf("top through ps: %+v", top)
	}
	for _, p := range top.Processes {
		if strings.Contains(p[0], "ps -o") {
			t.Fatalf("ps listed itself: %+v", top)
		}
	}
	if status, _ := te.Do("GET", "/containers/busy/top?ps_args=--bogus-option", nil); status != http.StatusBadRequest {
		t.Fatalf("top with an option ps refuses: %d", status)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/busy/stop?timeout=0", nil)
	if status, _ := te.Do("GET", "/containers/busy/top", nil); status != http.StatusConflict {
		t.Fatalf("top of stopped container: %d", status)
	}
	if status, _ := te.Do("GET", "/containers/busy/stats?stream=false", nil); status != http.StatusConflict {
		t.Fatalf("docker stats of stopped container: %d", status)
	}
}

type eventMessage struct {
	Type   string
	Action string
	Actor  struct {
		ID         string
		Attributes map[string]string
	}
	TimeNano int64 `json:"timeNano"`
}

func testEvents(t *testing.T, te *testEngine) {
	// A live stream sees the lifecycle of a container started after it.
	resp, err := http.Get(te.url(`/events?filters=` + url.QueryEscape(`{"type":["container"],"label":["evtest=1"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := te.Create(map[string]any{"command": []string{"sh", "-c", "exit 2"}, "labels": map[string]string{"evtest": "1"}})
	te.start(id)
	te.Wait(id)
	dec := json.NewDecoder(resp.Body)
	seen := map[string]eventMessage{}
	for len(seen) < 3 {
		var m eventMessage
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("event stream: %v (saw %v)", err, seen)
		}
		if m.Actor.ID != id {
			t.Fatalf("filter let through %+v", m)
		}
		switch m.Action {
		case "create", "start", "died":
			seen[m.Action] = m
		}
	}
	if seen["died"].Actor.Attributes["containerExitCode"] != "2" || seen["died"].Actor.Attributes["evtest"] != "1" {
		t.Fatalf("died event %+v", seen["died"])
	}

	// Past events with stream=false, filtered by container and event.
	body := te.Must(http.StatusOK, "GET", `/events?stream=false&filters=`+url.QueryEscape(`{"container":["`+id[:12]+`"],"event":["died"]}`), nil)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"Action":"died"`) {
		t.Fatalf("past died events: %s", body)
	}
	since := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	if body := te.Must(http.StatusOK, "GET", "/events?stream=false&since="+since, nil); len(bytes.TrimSpace(body)) != 0 {
		t.Fatalf("events since the future: %s", body)
	}
	for _, bad := range []string{`?filters={"bogus":["x"]}`, `?filters=notjson`, `?since=whenever`} {
		if status, _ := te.Do("GET", "/events"+bad, nil); status != http.StatusBadRequest {
			t.Errorf("events%s: %d, want 400", bad, status)
		}
	}
}

func testHealthcheck(t *testing.T, te *testEngine) {
	id := te.Create(map[string]any{
		"name":    "hc",
		"command": []string{"sleep", "600"},
		"healthconfig": map[string]any{
			"Test": []string{"CMD-SHELL", "test -f /tmp/ok"}, "Interval": int64(300 * time.Millisecond), "Retries": 2, "Timeout": int64(5 * time.Second),
		},
	})
	if status, _ := te.Do("GET", "/containers/hc/healthcheck", nil); status != http.StatusConflict {
		t.Fatalf("healthcheck of a container that is not running: %d", status)
	}
	te.start(id)
	var res struct {
		Status        string
		FailingStreak int
		Log           []struct{ ExitCode int }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/hc/healthcheck", nil), &res)
	if res.Status != "unhealthy" || len(res.Log) == 0 || res.Log[len(res.Log)-1].ExitCode != 1 {
		t.Fatalf("failing check %+v", res)
	}
	// The scheduled checks make the container unhealthy after the retries.
	health := func() (string, int) {
		var d struct {
			State struct {
				Health struct {
					Status        string
					FailingStreak int
				}
			}
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/hc/json", nil), &d)
		return d.State.Health.Status, d.State.Health.FailingStreak
	}
	deadline := time.Now().Add(15 * time.Second)
	for status, _ := health(); status != "unhealthy"; status, _ = health() {
		if time.Now().After(deadline) {
			t.Fatalf("never became unhealthy: %s", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _, code := execRun(t, te, id, map[string]any{"Cmd": []string{"touch", "/tmp/ok"}}, "")
	if code != 0 {
		t.Fatalf("touch exited %d", code)
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/hc/healthcheck", nil), &res)
	if res.Status != "healthy" || res.FailingStreak != 0 {
		t.Fatalf("passing check %+v", res)
	}
	if status, streak := health(); status != "healthy" || streak != 0 {
		t.Fatalf("state after passing check: %s %d", status, streak)
	}
	body := te.Must(http.StatusOK, "GET", `/events?stream=false&filters=`+url.QueryEscape(`{"event":["health_status"],"container":["hc"]}`), nil)
	if !strings.Contains(string(body), `"HealthStatus":"unhealthy"`) || !strings.Contains(string(body), `"HealthStatus":"healthy"`) {
		t.Fatalf("health events: %s", body)
	}
	plain := te.Create(map[string]any{"command": []string{"sleep", "600"}})
	te.start(plain)
	if status, _ := te.Do("GET", "/containers/"+plain+"/healthcheck", nil); status != http.StatusConflict {
		t.Fatalf("healthcheck without a healthconfig: %d", status)
	}
	if status, _ := te.Do("GET", "/containers/nosuch/healthcheck", nil); status != http.StatusNotFound {
		t.Fatalf("healthcheck of unknown container: %d", status)
	}
}

func testRestartPolicy(t *testing.T, te *testEngine) {
	id := te.Create(map[string]any{"command": []string{"sh", "-c", "echo ran; exit 3"}, "restart_policy": "on-failure", "restart_tries": 2})
	te.start(id)
	var d struct {
		RestartCount int
		State        struct {
			Status   string
			ExitCode int
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
		if d.RestartCount == 2 && d.State.Status == "exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarts: %+v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The last run may still be under way: wait for its line and its exit.
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, _ := readLogs(t, te, "/containers/"+id+"/logs?stdout=true")
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
		if out == "ran\nran\nran\n" && d.State.Status == "exited" {
			break
		}
		if time.Now().After(deadline) || strings.Count(out, "ran") > 3 {
			t.Fatalf("three runs expected: log %q, state %+v", out, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Give a fourth run the chance to happen wrongly.
	time.Sleep(time.Second)
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	if d.RestartCount != 2 || d.State.ExitCode != 3 || d.State.Status != "exited" {
		t.Fatalf("after the retry limit: %+v", d)
	}
	if status, _ := te.Do("POST", "/containers/"+id+"/shouldrestart", nil); status != http.StatusNotFound {
		t.Fatalf("shouldrestart past the limit: %d", status)
	}

	// always: restarted after a clean exit, but not after a user's stop.
	always := te.Create(map[string]any{"command": []string{"sh", "-c", "sleep 2"}, "restart_policy": "always"})
	te.start(always)
	deadline = time.Now().Add(20 * time.Second)
	for {
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+always+"/json", nil), &d)
		// Stop it while it runs again, not in the pause between runs.
		if d.RestartCount >= 1 && d.State.Status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("always never restarted: %+v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+always+"/stop?timeout=0", nil)
	time.Sleep(1500 * time.Millisecond)
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+always+"/json", nil), &d)
	if d.State.Status != "exited" {
		t.Fatalf("stopped always-container came back: %+v", d)
	}
}

// testPodmanClient checks the real client, when installed: a foreground
// run with output and exit code, logs, exec, top, stats and events.
func testPodmanClient(t *testing.T, te *testEngine) {
	podman := need.Program(t, "podman client tests", "podman")
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(podman, append([]string{"--remote", "--url", "tcp://" + te.Addr}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("podman %v: %v", args, err)
		}
		return string(out), code
	}
	if out, code := run("run", "--rm", "busybox", "sh", "-c", "echo hi; exit 6"); out != "hi\n" || code != 6 {
		t.Fatalf("run --rm: %q exit %d", out, code)
	}
	if out, code := run("run", "-d", "--name", "pc", "busybox", "sh", "-c", "echo started; sleep 600"); code != 0 {
		t.Fatalf("run -d: %q %d", out, code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for out, _ := run("logs", "pc"); out != "started\n"; out, _ = run("logs", "pc") {
		if time.Now().After(deadline) {
			t.Fatalf("logs: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, code := run("exec", "pc", "sh", "-c", "echo in-exec; exit 9"); out != "in-exec\n" || code != 9 {
		t.Fatalf("exec: %q %d", out, code)
	}
	if out, code := run("top", "pc", "pid,args"); code != 0 || !strings.Contains(out, "sleep 600") {
		t.Fatalf("top: %q %d", out, code)
	}
	if out, code := run("stats", "--no-stream", "--format", "{{.Name}} {{.PIDs}}", "pc"); code != 0 || !strings.HasPrefix(out, "pc ") {
		t.Fatalf("stats: %q %d", out, code)
	}
	if out, code := run("events", "--stream=false", "--filter", "container=pc", "--filter", "event=start", "--format", "{{.Status}} {{.Name}}"); code != 0 || strings.TrimSpace(out) != "start pc" {
		t.Fatalf("events: %q %d", out, code)
	}
	// Interactive, on a real terminal: run -it and exec -it.
	for _, args := range [][]string{{"run", "-it", "--rm", "busybox", "sh"}, {"exec", "-it", "pc", "sh"}} {
		out, code := runOnTerminal(t, podman, append([]string{"--remote", "--url", "tcp://" + te.Addr}, args...), "stty size; exit 3\n")
		if code != 3 || !strings.Contains(out, "24 80") {
			t.Fatalf("podman %v on a terminal: exit %d, output %q", args, code, out)
		}
	}
	// The client relies on a buffered reader: a quick stdin round trip.
	cmd := exec.Command(podman, "--remote", "--url", "tcp://"+te.Addr, "exec", "-i", "pc", "cat")
	cmd.Stdin = bufio.NewReader(strings.NewReader("through stdin\n"))
	if out, err := cmd.Output(); err != nil || string(out) != "through stdin\n" {
		t.Fatalf("exec -i: %q %v", out, err)
	}
}

// runOnTerminal runs a command on a fresh 24x80 pseudo-terminal, types
// input at the first shell prompt, and returns what the terminal showed
// and the exit code.
func runOnTerminal(t *testing.T, name string, args []string, input string) (string, int) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TERM=xterm")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	output := make(chan string, 1)
	prompt := make(chan struct{})
	go func() {
		var seen bytes.Buffer
		buf := make([]byte, 4096)
		prompted := false
		for {
			k, err := master.Read(buf)
			seen.Write(buf[:k])
			if !prompted && bytes.Contains(seen.Bytes(), []byte("# ")) {
				prompted = true
				close(prompt)
			}
			if err != nil {
				output <- seen.String()
				return
			}
		}
	}()
	select {
	case <-prompt:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no shell prompt from podman %v", args)
	}
	master.Write([]byte(input))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("podman %v did not end", args)
	}
	// The reader ends with EIO once every holder of the terminal is gone.
	master.Close()
	out := <-output
	code := 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		code = ee.ExitCode()
	} else if werr != nil {
		t.Fatal(werr)
	}
	return out, code
}
