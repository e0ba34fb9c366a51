package buildapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// layered is the query of a build with the layer cache, as podman build
// --layers sends it.
func layered(extra url.Values) url.Values {
	q := url.Values{"layers": {"1"}, "t": {"app:1"}, "dockerfile": {`["Containerfile"]`}}
	for k, v := range extra {
		q[k] = v
	}
	return q
}

const appfile = `FROM localhost/busybox
ARG GREETING=hello
ENV APP=/app
WORKDIR $APP
COPY data.txt ./data.txt
RUN echo "$GREETING $(cat data.txt)" > out.txt
LABEL stage=final
EXPOSE 8080/tcp
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=5s CMD ["cat", "/app/out.txt"]
ONBUILD RUN echo child
ENTRYPOINT ["/bin/sh", "-c"]
CMD ["cat /app/out.txt"]
`

func TestBuildStepsCacheAndRebuildFromChangedCopy(t *testing.T) {
	e := startEngine(t)
	files := map[string]string{"Containerfile": appfile, "data.txt": "one"}
	first := e.build(files, layered(url.Values{"labels": {`["team=build"]`}, "annotations": {`["org.example.a=b"]`}}))
	if first.status != http.StatusOK || first.err != "" || first.id == "" {
		t.Fatalf("first build: %d %q %s", first.status, first.err, first.body)
	}
	if strings.Contains(first.output, "Using cache") {
		t.Fatalf("a first build used the cache:\n%s", first.output)
	}
	img := e.inspect("app:1")
	if "sha256:"+img.ID != first.id {
		t.Fatalf("app:1 is %s, the build answered %s", img.ID, first.id)
	}
	c := img.Config
	if c.WorkingDir != "/app" || c.Labels["stage"] != "final" || c.Labels["team"] != "build" || c.StopSignal != "SIGTERM" ||
		strings.Join(c.Entrypoint, " ") != "/bin/sh -c" || strings.Join(c.Cmd, " ") != "cat /app/out.txt" || c.ExposedPorts["8080/tcp"] == nil {
		t.Fatalf("configuration not as built: %+v", c)
	}
	// A container of the image carries its labels, its own winning, as
	// Podman's and Docker's create merge them: its inspect shows them and
	// the list's label filter finds it.
	created := e.do("POST", "/v4.3.1/libpod/containers/create", "application/json",
		strings.NewReader(`{"image":"app:1","name":"labelled","labels":{"team":"mine"}}`))
	if created.status != http.StatusCreated {
		t.Fatalf("create of app:1: %d %s", created.status, created.body)
	}
	var ctr struct {
		Config struct{ Labels map[string]string }
	}
	if r := e.do("GET", "/v4.3.1/libpod/containers/labelled/json", "", nil); r.status != http.StatusOK || json.Unmarshal(r.body, &ctr) != nil ||
		ctr.Config.Labels["stage"] != "final" || ctr.Config.Labels["team"] != "mine" {
		t.Fatalf("the container's labels: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v4.3.1/libpod/containers/json?all=true&filters="+url.QueryEscape(`{"label":["stage=final"]}`), "", nil); !bytes.Contains(r.body, []byte(`"labelled"`)) {
		t.Fatalf("label=stage=final does not list the container: %s", r.body)
	}
	e.do("DELETE", "/v4.3.1/libpod/containers/labelled", "", nil)
	// The OCI format has no HEALTHCHECK, ONBUILD or SHELL: the build says
	// so, as Buildah does (the docker format below keeps them).
	if img.Annotations["org.example.a"] != "b" || img.Healthcheck != nil || !strings.Contains(first.output, "HEALTHCHECK is not supported for OCI") {
		t.Fatalf("annotations %v, healthcheck %v", img.Annotations, img.Healthcheck)
	}
	// FROM's layer, COPY and RUN each add one; the metadata steps add
	// history entries only.
	if len(img.RootFS.Layers) != 3 {
		t.Fatalf("%d layers, want 3: %v", len(img.RootFS.Layers), img.RootFS.Layers)
	}
	var runEntry bool
	for _, h := range img.History {
		if strings.Contains(h.CreatedBy, `echo "$GREETING`) && !h.EmptyLayer {
			runEntry = true
		}
	}
	if !runEntry || len(img.History) < 12 {
		t.Fatalf("history does not record every instruction: %+v", img.History)
	}

	// An unchanged context reuses every step, quickly.
	start := time.Now()
	again := e.build(files, layered(url.Values{"labels": {`["team=build"]`}, "annotations": {`["org.example.a=b"]`}}))
	took := time.Since(start)
	if again.id != first.id {
		t.Fatalf("cached rebuild made %s, want %s:\n%s", again.id, first.id, again.output)
	}
	if n := strings.Count(again.output, "Using cache"); n != 12 {
		t.Fatalf("cached rebuild used the cache %d times, want 12:\n%s", n, again.output)
	}
	t.Logf("fully cached rebuild took %v", took)

	// A changed COPY source reruns from the COPY on.
	files["data.txt"] = "two"
	changed := e.build(files, layered(nil))
	if changed.status != http.StatusOK || changed.err != "" {
		t.Fatalf("rebuild: %d %q", changed.status, changed.err)
	}
	before, after, _ := strings.Cut(changed.output, "COPY data.txt")
	if strings.Count(before, "Using cache") != 3 || strings.Contains(after, "Using cache") {
		t.Fatalf("the cache was not used up to the changed COPY only:\n%s", changed.output)
	}

	// nocache reruns everything.
	fresh := e.build(files, layered(url.Values{"nocache": {"1"}}))
	if fresh.err != "" || strings.Contains(fresh.output, "Using cache") {
		t.Fatalf("nocache build used the cache or failed: %q\n%s", fresh.err, fresh.output)
	}

	docker := e.build(files, layered(url.Values{"t": {"app:docker"}, "outputformat": {"application/vnd.docker.distribution.manifest.v2+json"}}))
	if docker.err != "" {
		t.Fatalf("docker format build: %q", docker.err)
	}
	if hc := e.inspect("app:docker").Healthcheck; hc == nil || strings.Join(hc.Test, " ") != "CMD cat /app/out.txt" {
		t.Fatalf("docker format healthcheck: %+v", hc)
	}
}

func TestBuildMultiStageTargetArgsAndOwnership(t *testing.T) {
	e := startEngine(t)
	files := map[string]string{
		"Containerfile": `ARG BASE=localhost/busybox
FROM $BASE AS builder
ARG MSG
RUN mkdir /out && echo "msg=$MSG" > /out/msg
COPY --chown=10:20 --chmod=640 conf/ /conf/
FROM scratch AS unused
COPY nothing-here /
FROM localhost/busybox
COPY --from=builder /out/msg /msg
COPY --from=builder /conf /conf
RUN stat -c '%u:%g %a' /conf/a.conf > /owner && cat /msg
`,
		"conf/a.conf": "x=1",
	}
	res := e.build(files, url.Values{"t": {"multi"}, "buildargs": {`{"MSG":"from-arg"}`}})
	if res.err != "" || res.id == "" {
		t.Fatalf("multi-stage build: %d %q %s", res.status, res.err, res.body)
	}
	if !strings.Contains(res.output, "msg=from-arg") || strings.Contains(res.output, "nothing-here") {
		t.Fatalf("output:\n%s", res.output)
	}
	archive := e.exportAll("multi")
	if !bytes.Contains(archive, []byte("10:20 640")) {
		t.Fatal("COPY --from did not keep the owner and mode set by --chown and --chmod")
	}
	target := e.build(files, url.Values{"t": {"builder-only"}, "target": {"builder"}, "buildargs": {`{"MSG":"t"}`}})
	if target.err != "" || strings.Contains(target.output, "STEP 3/3") {
		t.Fatalf("target build: %q\n%s", target.err, target.output)
	}
	if e.inspect("builder-only").ID == e.inspect("multi").ID {
		t.Fatal("--target built the last stage")
	}
	bad := e.build(files, url.Values{"target": {"nope"}})
	if bad.status != http.StatusBadRequest || !bytes.Contains(bad.body, []byte("target")) {
		t.Fatalf("unknown target: %d %s", bad.status, bad.body)
	}
}

func TestBuildFailingRunStopsAndCleansUp(t *testing.T) {
	e := startEngine(t)
	layersBefore := e.layerCount()
	res := e.build(map[string]string{"Containerfile": "FROM localhost/busybox\nRUN echo partial > /p\nRUN echo doomed-output && exit 7\nRUN echo never\n"}, layered(nil))
	if res.status != http.StatusOK || !strings.Contains(res.err, "exit status 7") || !strings.Contains(res.err, "RUN echo doomed-output") {
		t.Fatalf("failing build: %d %q", res.status, res.err)
	}
	if !strings.Contains(res.output, "doomed-output") || strings.Contains(res.output, "never") {
		t.Fatalf("output:\n%s", res.output)
	}
	if m := enginetest.MountsUnder(e.Dir); len(m) > 0 {
		t.Fatalf("mounts left behind: %v", m)
	}
	for _, dir := range []string{e.RunRoot + "/build", e.Root + "/tmp"} {
		if left := entries(dir); len(left) > 0 {
			t.Fatalf("%s keeps %v", dir, left)
		}
	}
	if left := entries(e.RunRoot + "/runc"); len(left) > 0 {
		t.Fatalf("runc keeps containers %v", left)
	}
	// The first RUN's layer stays (an intermediate image caches it); the
	// failed step's working layer is gone.
	if n := e.layerCount(); n != layersBefore+1 {
		t.Fatalf("%d layers after the failed build, want %d", n, layersBefore+1)
	}
}

func TestBuildSecretNeverInLayersOrHistory(t *testing.T) {
	e := startEngine(t)
	const secret = "s3cr3t-value-4f1c"
	files := map[string]string{
		"Containerfile":                  "FROM localhost/busybox\nRUN --mount=type=secret,id=tok echo secret-seen $(wc -c < /run/secrets/tok) bytes\nCOPY . /ctx/\nRUN --mount=type=secret,id=tok,target=/etc/tok cp /etc/tok /dev/null\n",
		"podman-build-secret123":         secret,
		"tmp/abs/podman-build-secret123": secret,
		"keep.txt":                       "kept",
	}
	res := e.build(files, url.Values{"t": {"sec"}, "secrets": {`["id=tok,src=podman-build-secret123"]`}})
	if res.err != "" || !strings.Contains(res.output, "secret-seen 17 bytes") {
		t.Fatalf("build: %q\n%s", res.err, res.output)
	}
	archive := e.exportAll("sec")
	if bytes.Contains(archive, []byte(secret)) {
		t.Fatal("the secret is in the image")
	}
	if !bytes.Contains(archive, []byte("kept")) {
		t.Fatal("COPY . did not copy the context")
	}
	for _, h := range e.inspect("sec").History {
		if strings.Contains(h.CreatedBy, secret) {
			t.Fatalf("history holds the secret: %s", h.CreatedBy)
		}
	}
	missing := e.build(map[string]string{"Containerfile": "FROM localhost/busybox\nRUN --mount=type=secret,id=absent,required=true true\n"}, url.Values{})
	if !strings.Contains(missing.err, "absent") {
		t.Fatalf("a required secret that was not given: %q", missing.err)
	}
}

func TestBuildContextCannotEscape(t *testing.T) {
	e := startEngine(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "host-only"), []byte("host-content-77"), 0o644); err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM localhost/busybox\nCOPY %s /got\n"
	cases := []struct {
		name  string
		files map[string]string
		src   string
	}{
		{"absolute symlink", map[string]string{"link": "-> " + outside}, "link/host-only"},
		{"relative symlink climbing out", map[string]string{"link": "-> ../../../../../../../../" + outside}, "link/host-only"},
		{"dot-dot source", map[string]string{}, "../../../../../../../../" + outside + "/host-only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.files["Containerfile"] = strings.Replace(dockerfile, "%s", tc.src, 1)
			res := e.build(tc.files, url.Values{"t": {"escape"}})
			if res.status == http.StatusOK && res.err == "" {
				if bytes.Contains(e.exportAll("escape"), []byte("host-content-77")) {
					t.Fatal("a file outside the context was copied")
				}
			}
		})
	}
	// A tar entry that climbs out is refused before anything is written.
	traversal := tartest.Files(t, map[string]string{"Containerfile": "FROM localhost/busybox\n", "../../../../../../" + outside + "/planted": "x"})
	res := e.buildTar(traversal, url.Values{})
	if res.status != http.StatusBadRequest || !bytes.Contains(res.body, []byte("context")) {
		t.Fatalf("traversal entry: %d %s", res.status, res.body)
	}
	// A symlink entry followed by a file below it writes inside the context.
	res = e.buildTar(tartest.Files(t, map[string]string{"Containerfile": "FROM localhost/busybox\n", "d": "-> " + outside, "d/planted": "x"}), url.Values{})
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Fatalf("a context entry was written outside the context (build %d)", res.status)
	}
}

func TestBuildRefusesWhatItDoesNotImplement(t *testing.T) {
	e := startEngine(t)
	ctx := tartest.Files(t, map[string]string{"Containerfile": "FROM localhost/busybox\n"})
	cases := []struct {
		query, field string
	}{
		{"rm=0", "rm"},
		{"forcerm=0", "forcerm"},
		{"squash=1", "squash"},
		{"platform=linux/s390x", "platform"},
		{"outputformat=application/x-nope", "outputformat"},
		{"isolation=2", "isolation"},
		{"cachefrom=" + url.QueryEscape(`["quay.io/x"]`), "cachefrom"},
		{"nosuchparameter=1", "nosuchparameter"},
		{"additionalbuildcontexts=" + url.QueryEscape(`{"a":{"Value":"/tmp"}}`), "additionalbuildcontexts"},
		{"nsoptions=" + url.QueryEscape(`[{"Name":"pid","Host":true}]`), "nsoptions"},
		{"idmappingoptions=" + url.QueryEscape(`{"HostUIDMapping":false}`), "idmappingoptions"},
		{"secrets=" + url.QueryEscape(`["id=a,env=X"]`), "secrets"},
		{"t=" + url.QueryEscape("Bad Name"), "t"},
		{"omithistory=1", "omithistory"},
		{"outputs=" + url.QueryEscape(`type=local,dest=/tmp/x`), "outputs"},
		{"format=squashfs", "format"},
		{"ulimits=" + url.QueryEscape(`["bogus=1"]`), "ulimits"},
		{"dockerfile=" + url.QueryEscape(`["missing.file"]`), "dockerfile"},
		{"localcontextdir=/tmp", "localcontextdir"},
		{"tlsVerify=maybe", "tlsVerify"},
		{"retry=-1", "retry"},
		{"retry-delay=soon", "retry-delay"},
		{"compressionFormat=lz4", "compressionFormat"},
		{"compressionLevel=99", "compressionLevel"},
		{"skipunusedstages=0", "skipunusedstages"},
	}
	for _, tc := range cases {
		r := e.do(http.MethodPost, "/v4.3.1/libpod/build?"+tc.query, "application/x-tar", bytes.NewReader(ctx))
		if r.status != http.StatusBadRequest || !bytes.Contains(r.body, []byte(tc.field)) {
			t.Errorf("%s: %d %s", tc.query, r.status, r.body)
		}
	}
	for _, header := range []string{"X-Registry-Auth", "X-Registry-Config"} {
		req, err := http.NewRequest(http.MethodPost, e.Base()+"/v4.3.1/libpod/build", bytes.NewReader(ctx))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(header, "not base64 json!")
		resp, err := e.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(header)) {
			t.Errorf("a malformed %s: %d %s", header, resp.StatusCode, body)
		}
	}
	r := e.do(http.MethodPost, "/v4.3.1/libpod/build", "application/x-www-form-urlencoded", bytes.NewReader(ctx))
	if r.status != http.StatusBadRequest {
		t.Errorf("form content type: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodPost, "/v4.3.1/libpod/build", "application/x-tar", strings.NewReader("not a tar stream at all, but long enough to be read as one........."))
	if r.status != http.StatusBadRequest {
		t.Errorf("garbage body: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodPost, "/v4.3.1/libpod/build", "application/x-tar", bytes.NewReader(tartest.Files(t, map[string]string{"Containerfile": "FROM localhost/busybox\nNOTANINSTRUCTION x\n"})))
	if r.status != http.StatusBadRequest {
		t.Errorf("bad Containerfile: %d %s", r.status, r.body)
	}
}

func TestLocalBuild(t *testing.T) {
	e := startEngine(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte("FROM localhost/busybox\nCOPY f /f\nRUN cat /f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("local-file"), 0o644); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"localcontextdir": {dir}, "t": {"local"}}
	res := decodeStream(t, e.do(http.MethodPost, "/v5.0.0/libpod/local/build?"+q.Encode(), "", nil))
	if res.err != "" || res.id == "" || !strings.Contains(res.output, "local-file") {
		t.Fatalf("local build: %d %q %s", res.status, res.err, res.body)
	}
	file := filepath.Join(dir, "f")
	for _, bad := range []string{"relative/dir", dir + "/../" + filepath.Base(dir), file, ""} {
		r := e.do(http.MethodPost, "/v5.0.0/libpod/local/build?localcontextdir="+url.QueryEscape(bad), "", nil)
		if r.status != http.StatusBadRequest || !bytes.Contains(r.body, []byte("localcontextdir")) {
			t.Errorf("localcontextdir %q: %d %s", bad, r.status, r.body)
		}
	}
	// Paths that do not exist are 404, as in Podman's local build.
	for _, q := range []string{"localcontextdir=" + url.QueryEscape(dir+"/missing"), "localcontextdir=" + url.QueryEscape(dir) + "&dockerfile=Nofile"} {
		r := e.do(http.MethodPost, "/v5.0.0/libpod/local/build?"+q, "", nil)
		if r.status != http.StatusNotFound || !bytes.Contains(r.body, []byte("file does not exist")) {
			t.Errorf("local build %s: %d %s", q, r.status, r.body)
		}
	}
}
