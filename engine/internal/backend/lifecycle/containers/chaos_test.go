package containers_test

import (
	"cmp"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/mounts"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// The chaos loop (make soak; BERTH_CHAOS=DURATION): workers drive a mixed
// workload against the real engine binary — containers with and without
// --rm and restart policies, some in a user namespace of their own
// (--userns=auto), stop, restart, pause, checkpoint and restore (where CRIU
// works), exec, logs, pods, volumes, networks with live connect, containers
// and networks through the Docker API, image tags — while the test kills the engine with SIGKILL at
// random and starts it again. Every answer goes into a ledger: an object
// acknowledged as created must exist, one acknowledged as removed must not,
// one whose request the kill cut may be either way, and nothing else may
// appear. At the end the ledger is checked against the restarted engine,
// restart policies must have been honoured, then everything is removed and
// nothing may be left: objects, conmon or runc state, mounts, network
// namespaces, cgroups, bridges, iptables rules.

// Ledger states of an object.
const (
	present = "present"
	absent  = "absent"
	unknown = "unknown"
)

type ledger struct {
	mu   sync.Mutex
	objs map[string]string // "kind/name" -> state
	// started holds the containers whose start was acknowledged, ids the
	// IDs of every container created (for the cgroup check).
	started map[string]bool
	ids     []string
	// done counts the acknowledged operations by kind, for the log.
	done map[string]int
}

func (l *ledger) count(what string) {
	l.mu.Lock()
	l.done[what]++
	l.mu.Unlock()
}

// created notes a container's or a pod's ID from its create answer.
func (l *ledger) created(body []byte) {
	var out struct {
		ID string `json:"Id"`
	}
	if json.Unmarshal(body, &out) == nil && out.ID != "" {
		l.mu.Lock()
		l.ids = append(l.ids, out.ID)
		l.mu.Unlock()
	}
}

func (l *ledger) start(c *chaosClient, name string) {
	if st, _ := c.do("POST", "/containers/"+name+"/start", nil); st == http.StatusNoContent {
		l.mu.Lock()
		l.started[name] = true
		l.mu.Unlock()
	}
}

// stopping notes a user's stop or restart of a container before it is
// sent: until a start is acknowledged again, its policy is not watched.
func (l *ledger) stopping(name string) {
	l.mu.Lock()
	l.started[name] = false
	l.mu.Unlock()
}

func (l *ledger) set(kind, name, state string) {
	l.mu.Lock()
	l.objs[kind+"/"+name] = state
	l.mu.Unlock()
}

// pick returns a random object of kind in state present, or "".
func (l *ledger) pick(r *rand.Rand, kind, prefix string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for k, st := range l.objs {
		if name, ok := strings.CutPrefix(k, kind+"/"); ok && st == present && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return names[r.IntN(len(names))]
}

// chaosClient sends requests that a kill may cut: a transport error is an
// answer of status 0.
type chaosClient struct {
	// base is the libpod API's, docker the Docker API's (same listener).
	base, docker       string
	client             *http.Client
	criu               bool
	requests, answered atomic.Int64
}

func (c *chaosClient) do(method, path string, body any) (int, []byte) {
	c.requests.Add(1)
	var rd *strings.Reader
	switch b := body.(type) {
	case nil:
		rd = strings.NewReader("")
	case string: // sent as it is (kube YAML)
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(body)
		rd = strings.NewReader(string(data))
	}
	base := c.base
	if p, ok := strings.CutPrefix(path, "docker:"); ok {
		base, path = c.docker, p
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// The engine is down: give it a moment rather than spin.
		time.Sleep(100 * time.Millisecond)
		return 0, nil
	}
	c.answered.Add(1)
	defer resp.Body.Close()
	var buf strings.Builder
	data := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(data)
		buf.Write(data[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, []byte(buf.String())
}

// ack records the outcome of a change: want on a status in ok, unknown on a
// cut request, and the failure otherwise.
func ack(l *ledger, failures *failureLog, kind, name, want string, status int, body []byte, ok ...int) bool {
	switch {
	case slices.Contains(ok, status):
		l.set(kind, name, want)
		return true
	case status == 0 || status >= 500:
		// Cut by a kill (a 500 names what the kill interrupted: the
		// runtime or netavark killed with the engine).
		if status != 0 {
			failures.addCut("%s %s: %d %s", kind, name, status, body)
		}
		l.set(kind, name, unknown)
	default:
		failures.add("%s %s: %d %s", kind, name, status, body)
		l.set(kind, name, unknown)
	}
	return false
}

type failureLog struct {
	mu   sync.Mutex
	msgs []string
	// cut are the 5xx answers, which a kill explains (logged, not failed).
	cut []string
}

func (f *failureLog) addCut(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cut) < 30 {
		f.cut = append(f.cut, fmt.Sprintf(format, args...))
	}
}

func (f *failureLog) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.msgs) < 50 {
		f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	}
}

// chaosWorker runs the mixed workload until stop closes.
func chaosWorker(w int, c *chaosClient, l *ledger, failures *failureLog, stop <-chan struct{}) {
	r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	own := fmt.Sprintf("w%d-", w)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		name := fmt.Sprintf("%s%d", own, i)
		switch op := r.IntN(100); {
		case op < 15: // a --rm container: gone by itself after its exit
			st, body := c.do("POST", "/containers/create", map[string]any{"image": "busybox", "name": name, "command": []string{"true"}, "remove": true})
			l.set("container", name, unknown)
			if st == http.StatusCreated {
				l.created(body)
				c.do("POST", "/containers/"+name+"/start", nil)
			} else if st != 0 && st < 500 {
				failures.add("create --rm %s: %d %s", name, st, body)
			}
		case op < 32: // a long-running container; restart=always ones exit every few seconds
			spec := map[string]any{"image": "busybox", "name": name, "command": []string{"sleep", "600"}, "stop_timeout": 0}
			if r.IntN(2) == 0 {
				spec["restart_policy"] = "always"
				spec["command"] = []string{"sleep", fmt.Sprint(1 + r.IntN(4))}
			}
			if r.IntN(4) == 0 {
				// --userns=auto: a range of the containers user's
				// subordinate IDs, allocated and released with it.
				spec["userns"] = map[string]string{"nsmode": "auto"}
			}
			if r.IntN(2) == 0 {
				spec["netns"] = map[string]string{"nsmode": "bridge"}
				spec["Networks"] = map[string]any{"chaos1": map[string]any{}}
				if r.IntN(2) == 0 {
					// A published port: a host port the engine picks, and
					// the firewall rules that go with it.
					spec["portmappings"] = []map[string]any{{"container_port": 80, "host_ip": "127.0.0.1"}}
				}
			}
			st, body := c.do("POST", "/containers/create", spec)
			if ack(l, failures, "container", name, present, st, body, http.StatusCreated) {
				if spec["userns"] != nil {
					l.count("userns=auto create")
				}
				l.created(body)
				l.start(c, name)
			}
		case op < 40: // stop, restart, or pause and unpause a container
			if ctr := l.pick(r, "container", own); ctr != "" {
				switch r.IntN(3) {
				case 0:
					// A user's stop: its restart policy no longer applies,
					// whether or not the stop got through.
					l.stopping(ctr)
					c.do("POST", "/containers/"+ctr+"/stop?timeout=0", nil)
				case 1:
					l.stopping(ctr)
					if st, _ := c.do("POST", "/containers/"+ctr+"/restart?t=0", nil); st == http.StatusNoContent {
						l.mu.Lock()
						l.started[ctr] = true
						l.mu.Unlock()
					}
				default:
					if st, _ := c.do("POST", "/containers/"+ctr+"/pause", nil); st == http.StatusNoContent {
						c.do("POST", "/containers/"+ctr+"/unpause", nil)
					}
				}
			}
		case op < 45: // exec in, and logs of, a running container
			if ctr := l.pick(r, "container", own); ctr != "" {
				st, body := c.do("POST", "/containers/"+ctr+"/exec", map[string]any{"Cmd": []string{"true"}})
				var ex struct {
					ID string `json:"Id"`
				}
				if st == http.StatusCreated && json.Unmarshal(body, &ex) == nil {
					c.do("POST", "/exec/"+ex.ID+"/start", map[string]any{"Detach": true})
				}
				c.do("GET", "/containers/"+ctr+"/logs?stdout=true&stderr=true", nil)
			}
		case op < 60: // rm -f, sometimes after a live connect to a second network
			if ctr := l.pick(r, "container", own); ctr != "" {
				if r.IntN(2) == 0 {
					c.do("POST", "/networks/chaos2/connect", map[string]any{"container": ctr})
				}
				st, body := c.do("DELETE", "/containers/"+ctr+"?force=true&timeout=0", nil)
				ack(l, failures, "container", ctr, absent, st, body, http.StatusOK, http.StatusNoContent)
			}
		case op < 72: // volumes
			st, body := c.do("POST", "/volumes/create", map[string]any{"Name": name})
			if ack(l, failures, "volume", name, present, st, body, http.StatusCreated) && r.IntN(2) == 0 {
				st, body = c.do("DELETE", "/volumes/"+name, nil)
				ack(l, failures, "volume", name, absent, st, body, http.StatusNoContent)
			}
		case op < 77: // pods: create, a member (restart=always half the time), start, remove with their containers
			st, body := c.do("POST", "/pods/create", map[string]any{"name": name})
			if ack(l, failures, "pod", name, present, st, body, http.StatusCreated) {
				l.created(body)
				member := ""
				if r.IntN(2) == 0 {
					spec := map[string]any{"image": "busybox", "name": name + "-m", "pod": name, "command": []string{"sleep", "600"}, "stop_timeout": 0}
					if r.IntN(2) == 0 {
						spec["restart_policy"] = "always"
						spec["command"] = []string{"sleep", fmt.Sprint(1 + r.IntN(4))}
					}
					st, body := c.do("POST", "/containers/create", spec)
					if ack(l, failures, "container", name+"-m", present, st, body, http.StatusCreated) {
						l.created(body)
						member = name + "-m"
						l.count("pod member")
					}
				}
				if st, _ := c.do("POST", "/pods/"+name+"/start", nil); st == http.StatusOK && member != "" {
					l.mu.Lock()
					l.started[member] = true
					l.mu.Unlock()
				}
				if r.IntN(2) == 0 {
					if member != "" {
						l.stopping(member)
					}
					st, body = c.do("DELETE", "/pods/"+name+"?force=true", nil)
					if ack(l, failures, "pod", name, absent, st, body, http.StatusOK) && member != "" {
						l.set("container", member, absent)
					} else if member != "" {
						l.set("container", member, unknown)
					}
				}
			}
		case op < 80: // kube play of a pod, and kube down half the time
			pod := "k" + name
			yaml := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  restartPolicy: Always\n  containers:\n  - name: c\n    image: localhost/busybox:latest\n    command: [sleep, %q]\n", pod, fmt.Sprint(1+r.IntN(600)))
			st, body := c.do("POST", "/play/kube", yaml)
			if !ack(l, failures, "pod", pod, present, st, body, http.StatusOK) {
				l.set("container", pod+"-c", unknown)
				break
			}
			l.set("container", pod+"-c", present)
			l.count("kube play")
			if r.IntN(2) == 0 {
				st, body = c.do("DELETE", "/play/kube", yaml)
				if ack(l, failures, "pod", pod, absent, st, body, http.StatusOK) {
					l.set("container", pod+"-c", absent)
					l.count("kube down")
				} else {
					l.set("container", pod+"-c", unknown)
				}
			}
		case op < 87: // checkpoint and restore a running container (CRIU)
			if ctr := l.pick(r, "container", own); ctr != "" && c.criu {
				// A checkpoint stops the container: until its restore is
				// acknowledged, its policy is not watched.
				l.stopping(ctr)
				if st, _ := c.do("POST", "/containers/"+ctr+"/checkpoint", nil); st == http.StatusOK {
					l.count("checkpoint")
					st, body := c.do("POST", "/containers/"+ctr+"/restore", nil)
					if st != http.StatusOK && st != 0 && st != http.StatusNotFound {
						// Not cut and not removed meanwhile: worth a look,
						// with the container's events (kept in the state
						// database) to say what ran it meanwhile.
						_, evs := c.do("GET", "/events?stream=false&filters="+url.QueryEscape(`{"container":["`+ctr+`"]}`), nil)
						failures.addCut("restore %s: %d %s; its events:\n%s", ctr, st, body, evs)
					}
					if st == http.StatusOK {
						l.count("restore")
						l.mu.Lock()
						l.started[ctr] = true
						l.mu.Unlock()
					}
				}
			}
		case op < 94: // the Docker API: a container on a network of its own, or a network
			if r.IntN(3) == 0 {
				// Networks take subnets from a small pool: one in two
				// of these removes one that is there.
				if net := l.pick(r, "network", "n"+own); net != "" && r.IntN(2) == 0 {
					st, body := c.do("DELETE", "docker:/networks/"+net, nil)
					ack(l, failures, "network", net, absent, st, body, http.StatusNoContent)
					break
				}
				st, body := c.do("POST", "docker:/networks/create", map[string]any{"Name": "n" + name})
				if st == http.StatusConflict && strings.Contains(string(body), "no free subnet") {
					// The subnet pool is full (the networks the workload
					// keeps): a right answer, nothing created.
					l.set("network", "n"+name, absent)
					l.count("network pool full")
					break
				}
				if ack(l, failures, "network", "n"+name, present, st, body, http.StatusCreated) {
					l.count("docker network create")
					if r.IntN(4) != 0 {
						st, body = c.do("DELETE", "docker:/networks/n"+name, nil)
						ack(l, failures, "network", "n"+name, absent, st, body, http.StatusNoContent)
					}
				}
				break
			}
			hc := map[string]any{"NetworkMode": "chaos1"}
			if r.IntN(2) == 0 {
				hc["RestartPolicy"] = map[string]any{"Name": "always"}
			}
			st, body := c.do("POST", "docker:/containers/create?name="+name, map[string]any{"Image": "busybox", "Cmd": []string{"sleep", fmt.Sprint(1 + r.IntN(4))}, "HostConfig": hc})
			if ack(l, failures, "container", name, present, st, body, http.StatusCreated) {
				l.created(body)
				l.count("docker create")
				if st, _ := c.do("POST", "docker:/containers/"+name+"/start", nil); st == http.StatusNoContent {
					l.mu.Lock()
					l.started[name] = true
					l.mu.Unlock()
				}
			}
		default: // image tags
			st, body := c.do("POST", "/images/busybox/tag?repo=localhost/chaos&tag="+name, nil)
			if ack(l, failures, "image", "localhost/chaos:"+name, present, st, body, http.StatusCreated) && r.IntN(2) == 0 {
				st, body = c.do("POST", "/images/localhost/chaos:"+name+"/untag?repo=localhost/chaos&tag="+name, nil)
				ack(l, failures, "image", "localhost/chaos:"+name, absent, st, body, http.StatusCreated)
			}
		}
		if i%20 == 19 {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestChaos is the chaos loop; BERTH_CHAOS is its duration (make soak).
func TestChaos(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("BERTH_CHAOS"))
	if err != nil || d <= 0 {
		t.Skip("set BERTH_CHAOS=DURATION (make soak) to run the chaos loop")
	}
	requireRuntime(t)
	testdeadline.Set(t, d+6*time.Minute)
	p, te := startEngineProcess(t)
	// A user namespace needs every directory above the storage searchable.
	for dir := filepath.Dir(p.Root); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o711)
	}
	te.loadBusybox()
	for _, n := range []string{"chaos1", "chaos2"} {
		te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": n})
	}
	c := &chaosClient{base: te.URL, docker: te.Base() + "/v1.41", client: &http.Client{Timeout: time.Minute}}
	// Checkpoints where the engine has a working CRIU (make soak names
	// one in BERTH_ENGINE_CRIU, which the engine inherits).
	if _, err := enginetest.FindCRIU(); err == nil {
		c.criu = true
	} else {
		t.Logf("no checkpoints in the workload: %v", err)
	}
	l := &ledger{objs: map[string]string{}, started: map[string]bool{}, done: map[string]int{}}
	failures := &failureLog{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); chaosWorker(w, c, l, failures, stop) }()
	}
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var ready []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(time.Duration(2000+r.IntN(6000)) * time.Millisecond)
		p.Kill9()
		time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
		started := time.Now()
		p.Start()
		ready = append(ready, time.Since(started))
	}
	close(stop)
	wg.Wait()
	// One kill more, with nothing in flight, then the ledger.
	p.Kill9()
	p.Start()
	slices.Sort(ready)
	t.Logf("chaos: %v, %d requests (%d answered), %d kills; restart-to-ready median %v, max %v",
		d, c.requests.Load(), c.answered.Load(), len(ready)+1, ready[len(ready)/2], ready[len(ready)-1])
	t.Logf("acknowledged: %v", l.done)
	for _, f := range failures.cut {
		t.Logf("5xx during the run: %s", f)
	}
	if keep := os.Getenv("BERTH_CHAOS_KEEP_LOG"); keep != "" {
		// The engine's log across all its starts, for a look afterwards.
		if data, err := os.ReadFile(p.LogPath); err == nil && os.WriteFile(keep, data, 0o644) == nil {
			t.Logf("the engine's log is kept in %s", keep)
		}
	}
	for _, f := range failures.msgs {
		t.Logf("refused during the run: %s", f)
	}

	var problems []string
	problems = append(problems, checkLedger(te, l)...)
	problems = append(problems, checkPolicies(te, l)...)
	problems = append(problems, checkRuntimeState(te, p)...)
	var nets []struct{ ID, Name string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/networks/json", nil), &nets)
	removeEverything(te)
	p.Stop()
	problems = append(problems, checkLeftovers(p, l.ids)...)
	// netavark's port forwarding chains of the networks removed (their
	// DNAT rules would forward to the next holder of an address).
	listing, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	for _, n := range nets {
		if n.Name == "podman" {
			continue // not removed
		}
		sum := sha512.Sum512([]byte(n.ID))
		if chain := "NETAVARK-DN-" + strings.ToUpper(hex.EncodeToString(sum[:]))[:13]; strings.Contains(string(listing), chain) {
			problems = append(problems, "port forwarding chain left: "+chain)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%d differences:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// checkLedger compares every object in the ledger with the engine, and
// every object of the engine with the ledger.
func checkLedger(te *testEngine, l *ledger) []string {
	var out []string
	exists := map[string]string{"container": "/containers/%s/exists", "volume": "/volumes/%s/exists", "pod": "/pods/%s/exists", "image": "/images/%s/exists", "network": "/networks/%s/exists"}
	for key, want := range l.objs {
		kind, name, _ := strings.Cut(key, "/")
		st, _ := te.Do("GET", fmt.Sprintf(exists[kind], name), nil)
		got := map[int]string{http.StatusNoContent: present, http.StatusNotFound: absent}[st]
		if got == "" || (want != unknown && got != want) {
			out = append(out, fmt.Sprintf("ledger: %s is %s, the engine says %d", key, want, st))
		}
	}
	var ctrs []struct {
		Names   []string
		IsInfra bool
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil), &ctrs)
	for _, ctr := range ctrs {
		if _, ok := l.objs["container/"+ctr.Names[0]]; !ok && !ctr.IsInfra {
			out = append(out, "ledger: container "+ctr.Names[0]+" was never acknowledged")
		}
	}
	var vols []struct{ Name string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/volumes/json", nil), &vols)
	for _, v := range vols {
		if _, ok := l.objs["volume/"+v.Name]; !ok {
			out = append(out, "ledger: volume "+v.Name+" was never acknowledged")
		}
	}
	var pods []struct{ Name string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/json", nil), &pods)
	for _, p := range pods {
		if _, ok := l.objs["pod/"+p.Name]; !ok {
			out = append(out, "ledger: pod "+p.Name+" was never acknowledged")
		}
	}
	var nets []struct{ Name string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/networks/json", nil), &nets)
	for _, n := range nets {
		if _, ok := l.objs["network/"+n.Name]; !ok && !slices.Contains([]string{"podman", "chaos1", "chaos2", "podman-default-kube-network"}, n.Name) {
			out = append(out, "ledger: network "+n.Name+" was never acknowledged")
		}
	}
	return append(out, checkUserNS(te)...)
}

// checkUserNS: no two containers' --userns=auto ranges overlap, on the
// host's side, in uids or in gids.
func checkUserNS(te *testEngine) []string {
	type span struct {
		name       string
		start, end uint64
	}
	var ctrs []struct{ Names []string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil), &ctrs)
	spans := map[string][]span{}
	for _, ctr := range ctrs {
		var d struct {
			HostConfig struct {
				IDMappings *struct{ UidMap, GidMap []string }
			}
		}
		if st, body := te.Do("GET", "/containers/"+ctr.Names[0]+"/json", nil); st != http.StatusOK || json.Unmarshal(body, &d) != nil || d.HostConfig.IDMappings == nil {
			continue
		}
		for kind, maps := range map[string][]string{"uid": d.HostConfig.IDMappings.UidMap, "gid": d.HostConfig.IDMappings.GidMap} {
			for _, m := range maps {
				var inner, host, size uint64
				if _, err := fmt.Sscanf(m, "%d:%d:%d", &inner, &host, &size); err == nil {
					spans[kind] = append(spans[kind], span{ctr.Names[0], host, host + size})
				}
			}
		}
	}
	var out []string
	for kind, ss := range spans {
		slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.start, b.start) })
		for i := 1; i < len(ss); i++ {
			if ss[i].start < ss[i-1].end && ss[i].name != ss[i-1].name {
				out = append(out, fmt.Sprintf("userns: the %s ranges of %s [%d, %d) and %s [%d, %d) overlap", kind, ss[i-1].name, ss[i-1].start, ss[i-1].end, ss[i].name, ss[i].start, ss[i].end))
			}
		}
	}
	return out
}

// checkPolicies: after the restart, every restart=always container whose
// start was acknowledged keeps being restarted (it is seen running, or its
// restart count grows, within a while), none is left with an error of its
// own start, and every --rm container that exited goes.
func checkPolicies(te *testEngine, l *ledger) []string {
	type view struct {
		RestartCount int
		State        struct{ Status, Error string }
		HostConfig   struct {
			AutoRemove    bool
			RestartPolicy struct{ Name string }
		}
	}
	// A container whose rm -f a kill cut is stopped by the user: its
	// policy no longer applies.
	watched := func(name string) bool { return l.started[name] && l.objs["container/"+name] == present }
	first := map[string]int{}
	var out []string
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		out = out[:0]
		var ctrs []struct{ Names []string }
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil), &ctrs)
		for _, ctr := range ctrs {
			name := ctr.Names[0]
			var d view
			if st, body := te.Do("GET", "/containers/"+name+"/json", nil); st != http.StatusOK || json.Unmarshal(body, &d) != nil {
				continue
			}
			if _, seen := first[name]; !seen {
				first[name] = d.RestartCount
			}
			switch {
			case strings.Contains(d.State.Error, "already exists"):
				out = append(out, fmt.Sprintf("policy: %s is %s: %s", name, d.State.Status, d.State.Error))
			case d.HostConfig.RestartPolicy.Name == "always" && watched(name) && d.State.Status != "running" && d.RestartCount == first[name]:
				_, body := te.Do("GET", "/containers/"+name+"/json", nil)
				var full struct{ State json.RawMessage }
				json.Unmarshal(body, &full)
				out = append(out, fmt.Sprintf("policy: %s (restart=always, %d restarts) is %s and not restarted: %s", name, d.RestartCount, d.State.Status, full.State))
			case d.HostConfig.RestartPolicy.Name == "always" && d.State.Status == "initialized":
				// The workload never inits: a start a kill cut after the
				// runtime's create, which the engine finishes.
				out = append(out, fmt.Sprintf("policy: %s (restart=always) is left initialized: its cut start was not finished", name))
			case d.HostConfig.RestartPolicy.Name == "always" && watched(name):
				first[name] = -1 // restarted: done with it
			case d.HostConfig.AutoRemove && d.State.Status == "exited":
				out = append(out, fmt.Sprintf("policy: %s (--rm) exited and is still there", name))
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
	}
}

// checkRuntimeState: every runc container and every conmon of the engine
// belongs to a container the engine lists as created, initialized, running
// or paused.
// restart=always containers exit and start again all the time, and each
// exit and restart has a moment when runc and conmon have it while the
// record says exited (a runtime create takes seconds on a loaded machine);
// an orphan is one that five looks over ten seconds all find.
func checkRuntimeState(te *testEngine, p *enginetest.Process) []string {
	var found map[string]bool
	for look := 0; look < 5; look++ {
		if look > 0 {
			time.Sleep(2500 * time.Millisecond)
		}
		var ctrs []struct {
			ID    string `json:"Id"`
			State string
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil), &ctrs)
		live, state := map[string]bool{}, map[string]string{}
		for _, c := range ctrs {
			// "initialized" is created by the runtime (a start a kill cut
			// after runc create leaves one where its policy is "no").
			live[c.ID] = c.State == "running" || c.State == "initialized" || c.State == "created" || c.State == "paused"
			state[c.ID] = c.State
		}
		now := map[string]bool{}
		states, _ := os.ReadDir(filepath.Join(p.RunRoot, "runc"))
		for _, st := range states {
			if !live[st.Name()] {
				now[fmt.Sprintf("runc state of a container the engine does not run: %s (%q)", st.Name(), state[st.Name()])] = true
			}
		}
		for _, id := range conmonsOf(p.RunRoot) {
			if !live[id] {
				now[fmt.Sprintf("conmon of a container the engine does not run: %s (%q)", id, state[id])] = true
			}
		}
		if found == nil {
			found = now
		}
		for k := range found {
			if !now[k] {
				delete(found, k)
			}
		}
	}
	var out []string
	for k := range found {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// conmonsOf lists the container IDs of the conmon processes that use runRoot.
func conmonsOf(runRoot string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		args := strings.Split(string(data), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "conmon" || !strings.Contains(string(data), runRoot) {
			continue
		}
		for i, a := range args {
			if a == "-c" && i+1 < len(args) {
				out = append(out, args[i+1])
			}
		}
	}
	return out
}

// removeEverything removes the engine's pods, containers, volumes, networks
// and the test's image tags.
func removeEverything(te *testEngine) {
	var pods []struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/json", nil), &pods)
	for _, p := range pods {
		// timeout=0: a kube container's sleep ignores SIGTERM, and
		// each pod would take its 10 s stop timeout.
		te.Do("DELETE", "/pods/"+p.ID+"?force=true&timeout=0", nil)
	}
	enginetest.RemoveAll(te.Do)
	var vols []struct{ Name string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/volumes/json", nil), &vols)
	for _, v := range vols {
		te.Do("DELETE", "/volumes/"+v.Name+"?force=true", nil)
	}
	var nets []struct{ Name string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/networks/json", nil), &nets)
	for _, n := range nets {
		if n.Name != "podman" {
			te.Do("DELETE", "/networks/"+n.Name+"?force=true", nil)
		}
	}
}

// checkLeftovers lists what a stopped engine with no objects left behind:
// processes, runc state, mounts, network namespaces, cgroups, bridges and
// iptables rules of its networks.
func checkLeftovers(p *enginetest.Process, ids []string) []string {
	var out []string
	for _, id := range conmonsOf(p.RunRoot) {
		out = append(out, "conmon left: "+id)
	}
	if states, _ := os.ReadDir(filepath.Join(p.RunRoot, "runc")); len(states) > 0 {
		out = append(out, fmt.Sprintf("runc state left: %d containers", len(states)))
	}
	// containers/storage's containers (each --userns=auto one holds its
	// range there until it goes).
	var layers []struct{ ID string }
	if data, err := os.ReadFile(filepath.Join(p.Root, "overlay-containers", "containers.json")); err == nil && json.Unmarshal(data, &layers) == nil && len(layers) > 0 {
		out = append(out, fmt.Sprintf("storage containers left: %d", len(layers)))
	}
	for _, dir := range []string{p.Root, p.RunRoot} {
		if mps, _ := mounts.Under(dir, nil); len(mps) > 0 {
			out = append(out, "mounts left: "+strings.Join(mps, ", "))
		}
	}
	for _, dir := range []string{"netns", "netns-keep"} {
		if ns, _ := os.ReadDir(filepath.Join(p.RunRoot, dir)); len(ns) > 0 {
			out = append(out, fmt.Sprintf("network namespaces left in %s: %d", dir, len(ns)))
		}
	}
	// Containers' and pods' cgroups (a pod's holds its infra's), and any
	// process still in one.
	for _, id := range ids {
		for _, pattern := range []string{"/sys/fs/cgroup/*/berth/berth-" + id, "/sys/fs/cgroup/*/berth/berth-pod-" + id} {
			if cg, _ := filepath.Glob(pattern); len(cg) > 0 {
				out = append(out, "cgroups left: "+strings.Join(cg, ", "))
			}
		}
	}
	cgroups, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, f := range cgroups {
		data, _ := os.ReadFile(f)
		for _, id := range ids {
			if strings.Contains(string(data), id) {
				cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
				out = append(out, fmt.Sprintf("process left in a cgroup of %s: %s %q", id, filepath.Dir(f), strings.ReplaceAll(string(cmd), "\x00", " ")))
				break
			}
		}
	}
	// The jumps of published ports (they name the container, not an
	// address).
	if data, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "NETAVARK-HOSTPORT-DNAT").Output(); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			for _, id := range ids {
				if strings.Contains(line, "id: "+id) {
					out = append(out, "left: "+line)
				}
			}
		}
	}
	// Bridges of its networks and iptables rules naming their subnets
	// (namespace files are counted above).
	for _, l := range p.NetworkLeaks() {
		if !strings.HasPrefix(l, "file ") {
			out = append(out, "left: "+l)
		}
	}
	return out
}
