package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
	"github.com/berth-project/berth/shared/rlimit"
)

type fileHandlers struct {
	f core.ContainerFilesystems
}

// export streams the rootfs as a tar; errors before the first byte get the
// usual error body, later ones can only cut the stream.
func (h fileHandlers) export(w http.ResponseWriter, r *http.Request) {
	sw := &httpwire.TarAnswer{W: w}
	if err := h.f.Export(r.Context(), pathParam(r, "name"), sw); err != nil && !sw.Started {
		writeError(w, err)
	}
}

type checkpointHandlers struct {
	c core.Containers
	k core.ContainerCheckpoints
}

type checkpointQuery struct {
	Keep           bool   `query:"keep"`
	LeaveRunning   bool   `query:"leaverunning"`
	TCPEstablished bool   `query:"tcpestablished"`
	FileLocks      bool   `query:"filelocks"`
	PrintStats     bool   `query:"printstats"`
	IgnoreRootFS   string `query:"ignorerootfs"`
	IgnoreVolumes  string `query:"ignorevolumes"`
	Export         string `query:"export"`
	PreCheckpoint  string `query:"precheckpoint"`
	WithPrevious   string `query:"withprevious"`
	CreateImage    string `query:"createimage"`
}

// checkpointReport is Checkpoint's answer, in Podman's shape.
type checkpointReport struct {
	ID              string            `json:"Id"`
	RawInput        string            `json:"RawInput"`
	RuntimeDuration int64             `json:"runtime_checkpoint_duration"`
	CRIUStatistics  map[string]uint64 `json:"criu_statistics"`
}

// restoreReport is Restore's answer, in Podman's shape.
type restoreReport struct {
	ID              string            `json:"Id"`
	RawInput        string            `json:"RawInput"`
	RuntimeDuration int64             `json:"runtime_restore_duration"`
	CRIUStatistics  map[string]uint64 `json:"criu_statistics"`
}

// truthy reads an optional boolean parameter that clients also send empty
// (Podman's client sends "export=" when no export file is given).
func truthy(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// onlyWithImport refuses import options given to an in-place restore.
func onlyWithImport(opts map[string]bool) error {
	for name, set := range opts {
		if set {
			return core.InvalidArgument(name, errors.New("applies only to a restore that imports a checkpoint archive (import=true)"))
		}
	}
	return nil
}

// checkpoint dumps the container; with export=true the answer is the
// checkpoint archive itself (errors before its first byte get the usual
// error body, later ones can only cut the stream).
func (h checkpointHandlers) checkpoint(w http.ResponseWriter, r *http.Request) {
	// Podman's bindings send the names lowercased (printstats).
	var q checkpointQuery
	if !queryInto(w, r, &q) {
		return
	}
	if err := unsupported(map[string]bool{"preCheckpoint": truthy(q.PreCheckpoint),
		"withPrevious": truthy(q.WithPrevious), "createImage": q.CreateImage != ""}); err != nil {
		writeError(w, err)
		return
	}
	export := truthy(q.Export)
	if !export {
		if err := unsupported(map[string]bool{"ignoreRootFS (without export)": truthy(q.IgnoreRootFS),
			"ignoreVolumes (without export)": truthy(q.IgnoreVolumes)}); err != nil {
			writeError(w, err)
			return
		}
	}
	name := pathParam(r, "name")
	c, err := h.c.Lookup(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	opts := core.CheckpointOptions{
		LeaveRunning: q.LeaveRunning, TCPEstablished: q.TCPEstablished, FileLocks: q.FileLocks, Keep: q.Keep,
		PrintStats: q.PrintStats, IgnoreRootFS: truthy(q.IgnoreRootFS), IgnoreVolumes: truthy(q.IgnoreVolumes),
	}
	var sw *httpwire.TarAnswer
	if export {
		sw = &httpwire.TarAnswer{W: w}
		opts.Export = sw
	}
	report, err := h.k.Checkpoint(r.Context(), c.ID, opts)
	switch {
	case err != nil && sw != nil && sw.Started:
		// The archive is cut short; the client sees a truncated tar.
		return
	case err != nil:
		writeError(w, err)
	case sw == nil:
		writeJSON(w, http.StatusOK, checkpointReport{ID: c.ID, RawInput: name,
			RuntimeDuration: report.RuntimeDuration.Microseconds(), CRIUStatistics: report.CRIUStatistics})
	}
}

type restoreQuery struct {
	Keep            bool     `query:"keep"`
	TCPEstablished  bool     `query:"tcpestablished"`
	FileLocks       bool     `query:"filelocks"`
	PrintStats      bool     `query:"printstats"`
	IgnoreRootFS    string   `query:"ignorerootfs"`
	IgnoreVolumes   string   `query:"ignorevolumes"`
	IgnoreStaticIP  bool     `query:"ignorestaticip"`
	IgnoreStaticMAC bool     `query:"ignorestaticmac"`
	Import          string   `query:"import"`
	Name            string   `query:"name"`
	Pod             string   `query:"pod"`
	PublishPorts    []string `query:"publishports"`
	// TCPClose is Podman 5's restore --tcp-close, which runc 1.1 has no
	// option for: refused rather than ignored.
	TCPClose bool `query:"tcpclose"`
}

// restore restores a checkpointed container in place, or, with
// import=true, creates one from the checkpoint archive in the body (the
// path's name is then ignored, as Podman's client sends a placeholder).
func (h checkpointHandlers) restore(w http.ResponseWriter, r *http.Request) {
	var q restoreQuery
	if !queryInto(w, r, &q) {
		return
	}
	if q.TCPClose {
		writeError(w, core.InvalidArgument("tcpClose", errors.New("closing the checkpoint's TCP connections at restore is not supported (runc 1.1 has no --tcp-close); restore them with tcpEstablished, or checkpoint without them")))
		return
	}
	opts := core.RestoreOptions{
		TCPEstablished: q.TCPEstablished, FileLocks: q.FileLocks, Keep: q.Keep, PrintStats: q.PrintStats,
		IgnoreStaticIP: q.IgnoreStaticIP, IgnoreStaticMAC: q.IgnoreStaticMAC,
		Name: q.Name, Pod: q.Pod, IgnoreRootFS: truthy(q.IgnoreRootFS), IgnoreVolumes: truthy(q.IgnoreVolumes),
	}
	// Podman 4.3.1's client sends each port twice, as publishPorts and
	// as publishports, which the case-folded query merges.
	seen := map[string]bool{}
	for _, p := range q.PublishPorts {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		pm, err := core.ParsePortMapping(p)
		if err != nil {
			writeError(w, core.InvalidArgument("publishPorts", err))
			return
		}
		opts.PublishPorts = append(opts.PublishPorts, pm)
	}
	name := pathParam(r, "name")
	if truthy(q.Import) {
		report, err := h.k.Import(r.Context(), r.Body, opts)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, restoreReport{ID: report.ID, RawInput: name,
			RuntimeDuration: report.RuntimeDuration.Microseconds(), CRIUStatistics: report.CRIUStatistics})
		return
	}
	if err := onlyWithImport(map[string]bool{"name": q.Name != "", "pod": q.Pod != "", "publishPorts": opts.PublishPorts != nil,
		"ignoreRootFS": opts.IgnoreRootFS, "ignoreVolumes": opts.IgnoreVolumes}); err != nil {
		writeError(w, err)
		return
	}
	c, err := h.c.Lookup(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	report, err := h.k.Restore(r.Context(), c.ID, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, restoreReport{ID: c.ID, RawInput: name,
		RuntimeDuration: report.RuntimeDuration.Microseconds(), CRIUStatistics: report.CRIUStatistics})
}

type mountHandlers struct {
	c core.Containers
	m core.ContainerMounts
}

type renameQuery struct {
	Name string `query:"name"`
}

func (h mountHandlers) rename(w http.ResponseWriter, r *http.Request) {
	var q renameQuery
	if !queryInto(w, r, &q) {
		return
	}
	finishNoContent(w, h.m.Rename(r.Context(), pathParam(r, "name"), q.Name))
}

type containerHandlers struct {
	c core.Containers
}

// createResponse is CreateContainer's answer.
type createResponse struct {
	ID       string   `json:"Id"`
	Warnings []string `json:"Warnings"`
}

func (h containerHandlers) create(w http.ResponseWriter, r *http.Request) {
	spec, err := decodeSpec(r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	id, warnings, err := h.c.Create(r.Context(), spec)
	if err != nil {
		writeError(w, err)
		return
	}
	if warnings == nil {
		warnings = []string{}
	}
	writeJSON(w, http.StatusCreated, createResponse{ID: id, Warnings: warnings})
}

// decodeSpec reads a creation request: malformed members are a 400 that
// names the member, and so is a member the engine would otherwise ignore
// (see checkSpecMembers).
func decodeSpec(body io.Reader) (core.ContainerSpec, error) {
	var spec core.ContainerSpec
	var raw json.RawMessage
	if _, err := decodeJSON(body, &raw, false); err != nil {
		return spec, err
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		if errors.Is(err, rlimit.ErrInvalid) {
			return spec, core.InvalidArgument("r_limits", errors.Unwrap(err))
		}
		return spec, bodyError(err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return spec, core.InvalidArgument("body", errors.New("a creation request is a JSON object"))
	}
	return spec, checkSpecMembers(members)
}

type listQuery struct {
	All     bool                `query:"all"`
	Limit   int                 `query:"limit"`
	Last    int                 `query:"last"`
	Size    bool                `query:"size"`
	Filters map[string][]string `query:"filters"`
	// Namespace (podman ps --ns) fills each running container's
	// namespaces.
	Namespace bool `query:"namespace"`
}

func (h containerHandlers) list(w http.ResponseWriter, r *http.Request) {
	var q listQuery
	if !queryInto(w, r, &q) {
		return
	}
	last := q.Limit
	if q.Last > 0 {
		last = q.Last
	}
	if last < 0 {
		last = 0
	}
	list, err := h.c.List(r.Context(), core.ListContainersOptions{All: q.All || last > 0, Last: last, Size: q.Size, Filters: q.Filters, Namespaces: q.Namespace})
	finishJSON(w, http.StatusOK, list, err)
}

type pruneQuery struct {
	Filters map[string][]string `query:"filters"`
}

// pruneEntry is one line of PruneContainers' answer.
type pruneEntry struct {
	ID   string `json:"Id"`
	Err  string `json:"Err,omitempty"`
	Size uint64 `json:"Size"`
}

func (h containerHandlers) prune(w http.ResponseWriter, r *http.Request) {
	var q pruneQuery
	if !queryInto(w, r, &q) {
		return
	}
	reports, err := h.c.Prune(r.Context(), q.Filters)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]pruneEntry, 0, len(reports))
	for _, rep := range reports {
		out = append(out, pruneEntry{ID: rep.ID, Err: rep.Err, Size: rep.Size})
	}
	writeJSON(w, http.StatusOK, out)
}

type removeQuery struct {
	Force         bool   `query:"force"`
	Ignore        bool   `query:"ignore"`
	Depend        bool   `query:"depend"`
	Volumes       bool   `query:"volumes"`
	DockerVolumes bool   `query:"v"`
	Timeout       string `query:"timeout"`
}

func (q removeQuery) timeout() (*uint, error) { return optionalUint("timeout", q.Timeout) }

// removeEntry is one line of RemoveContainer's answer.
type removeEntry struct {
	ID       string `json:"Id"`
	Err      any    `json:"Err,omitempty"`
	RawInput string `json:"RawInput"`
}

func (h containerHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q removeQuery
	timeout, ok := timedQueryInto(w, r, &q)
	if !ok {
		return
	}
	name := pathParam(r, "name")
	var id string
	if c, err := h.c.Lookup(r.Context(), name); err == nil {
		id = c.ID
	} else if !(q.Ignore && errors.Is(err, core.ErrNoSuchContainer)) {
		writeError(w, err)
		return
	}
	// With depend, the containers that require this one go first, each
	// reported before it.
	removed := []removeEntry{}
	err := h.c.Remove(r.Context(), name, core.RemoveContainerOptions{
		Force: q.Force, Ignore: q.Ignore, Volumes: q.Volumes || q.DockerVolumes, Timeout: timeout, Depend: q.Depend,
		Removed: func(dep string) { removed = append(removed, removeEntry{ID: dep, RawInput: dep}) },
	})
	if err != nil {
		writeError(w, err)
		return
	}
	// A container that was not there (ignore=true) is not reported, as
	// Podman answers: podman rm -i prints nothing for it.
	if id != "" {
		removed = append(removed, removeEntry{ID: id, RawInput: name})
	}
	writeJSON(w, http.StatusOK, removed)
}

type inspectQuery struct {
	Size bool `query:"size"`
}

func (h containerHandlers) inspect(w http.ResponseWriter, r *http.Request) {
	var q inspectQuery
	if !queryInto(w, r, &q) {
		return
	}
	data, err := h.c.Inspect(r.Context(), pathParam(r, "name"), q.Size)
	finishJSON(w, http.StatusOK, data, err)
}

func (h containerHandlers) exists(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "name")
	ok, err := h.c.Exists(r.Context(), name)
	if err == nil && !ok {
		err = core.NoSuchContainer(name)
	}
	writeExists(w, err, core.ErrNoSuchContainer)
}

func (h containerHandlers) init(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "name")
	err := h.c.Init(r.Context(), name)
	if errors.Is(err, core.ErrStateConflict) {
		// Already initialised (created, running ...): nothing to do.
		err = fmt.Errorf("%s: %w", err.Error(), core.ErrNotModified)
	}
	finishNoContent(w, err)
}

func (h containerHandlers) stop(w http.ResponseWriter, r *http.Request) {
	q, timeout, ok := stopQueryInto(w, r)
	if !ok {
		return
	}
	err := h.c.Stop(r.Context(), pathParam(r, "name"), timeout)
	if q.Ignore && errors.Is(err, core.ErrNoSuchContainer) {
		err = nil
	}
	finishNoContent(w, err)
}

func (h containerHandlers) kill(w http.ResponseWriter, r *http.Request) {
	q := killQuery{Signal: "SIGKILL"}
	if !queryInto(w, r, &q) {
		return
	}
	finishNoContent(w, h.c.Kill(r.Context(), pathParam(r, "name"), q.Signal))
}

func (h containerHandlers) restart(w http.ResponseWriter, r *http.Request) {
	_, timeout, ok := stopQueryInto(w, r)
	if !ok {
		return
	}
	finishNoContent(w, h.c.Restart(r.Context(), pathParam(r, "name"), timeout))
}

type waitQuery struct {
	Condition []string `query:"condition"`
	Interval  string   `query:"interval"`
}

func (h containerHandlers) wait(w http.ResponseWriter, r *http.Request) {
	var q waitQuery
	if !queryInto(w, r, &q) {
		return
	}
	code, err := h.c.Wait(r.Context(), pathParam(r, "name"), splitList(q.Condition, ","))
	finishJSON(w, http.StatusOK, code, err)
}

type updateQuery struct {
	RestartPolicy  string `query:"restartPolicy"`
	RestartRetries string `query:"restartRetries"`
}

// updateBody is Podman's update body: the resources (all that 4.3.1
// sends) and, from Podman 5 on, healthcheck changes and per-device limits
// by device path. Any other member is a 400 naming it.
type updateBody struct {
	specs.LinuxResources
	core.HealthUpdate
	DeviceReadBPs   []pathRate `json:"DeviceReadBPs,omitempty"`
	DeviceWriteBPs  []pathRate `json:"DeviceWriteBPs,omitempty"`
	DeviceReadIOPs  []pathRate `json:"DeviceReadIOPs,omitempty"`
	DeviceWriteIOPs []pathRate `json:"DeviceWriteIOPs,omitempty"`
	// Podman 6's --env, --unsetenv and --ulimit.
	Env      []string        `json:"Env"`
	UnsetEnv []string        `json:"UnsetEnv"`
	Rlimits  []rlimit.Rlimit `json:"r_limits,omitempty"`
}

// pathRate is one device's limit in Podman 5's update.
type pathRate struct {
	Path string `json:"Path"`
	Rate uint64 `json:"Rate"`
}

// byPath is a list of limits as the spec keeps them; the last entry for a
// path wins.
func byPath(l []pathRate) map[string]specs.LinuxThrottleDevice {
	if len(l) == 0 {
		return nil
	}
	m := make(map[string]specs.LinuxThrottleDevice, len(l))
	for _, d := range l {
		m[d.Path] = specs.LinuxThrottleDevice{Rate: d.Rate}
	}
	return m
}

func (h containerHandlers) update(w http.ResponseWriter, r *http.Request) {
	var q updateQuery
	if !queryInto(w, r, &q) {
		return
	}
	var body updateBody
	if err := decodeStrict(r, &body); err != nil {
		writeError(w, err)
		return
	}
	opts := core.UpdateContainerOptions{
		ThrottleReadBpsDevice: byPath(body.DeviceReadBPs), ThrottleWriteBpsDevice: byPath(body.DeviceWriteBPs),
		ThrottleReadIOPSDevice: byPath(body.DeviceReadIOPs), ThrottleWriteIOPSDevice: byPath(body.DeviceWriteIOPs),
		Env: body.Env, UnsetEnv: body.UnsetEnv, Rlimits: body.Rlimits,
	}
	if !reflect.ValueOf(body.LinuxResources).IsZero() {
		opts.Resources = &body.LinuxResources
	}
	if !body.HealthUpdate.Empty() {
		opts.Health = &body.HealthUpdate
	}
	if _, ok := r.URL.Query()["restartPolicy"]; ok {
		p := q.RestartPolicy
		opts.RestartPolicy = &p
		tries, err := optionalUint("restartRetries", q.RestartRetries)
		if err != nil {
			writeError(w, err)
			return
		}
		opts.RestartTries = tries
	}
	name := pathParam(r, "name")
	if err := h.c.Update(r.Context(), name, opts); err != nil {
		writeError(w, err)
		return
	}
	c, err := h.c.Lookup(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, c.ID)
}
