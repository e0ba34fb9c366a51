package dockerapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	containertypes "github.com/docker/docker/api/types/container"

	"github.com/berth-project/berth/engine/internal/core"
)

// containerList answers docker ps.
func (s *server) containerList(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	opts := core.ListContainersOptions{
		All:     q.boolean("all", false),
		Size:    q.boolean("size", false),
		Last:    int(q.integer("limit", 0)),
		Filters: q.filters(),
		Detail:  true,
	}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	if opts.Last < 0 {
		opts.Last = 0
	}
	if opts.Last > 0 {
		opts.All = true
	}
	if err := s.translateContainerFilters(opts.Filters); err != nil {
		writeError(w, err)
		return
	}
	list, err := s.deps.Containers.List(r.Context(), opts)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]containertypes.Summary, 0, len(list))
	ids := s.networkIDs(r.Context())
	for _, c := range list {
		if c.IsInfra {
			continue
		}
		out = append(out, s.summary(c, ids))
	}
	writeJSON(w, http.StatusOK, out)
}

// translateContainerFilters rewrites Docker's filter values into the
// engine's: states ("created", "exited"), network names.
func (s *server) translateContainerFilters(f map[string][]string) error {
	for key, values := range f {
		switch key {
		case "status":
			for i, v := range values {
				switch v {
				case "created", "running", "paused", "exited", "restarting", "removing", "dead":
				default:
					return core.InvalidArgument("filters", fmt.Errorf("invalid filter 'status=%s'", v))
				}
				values[i] = v
			}
		case "network":
			for i, v := range values {
				values[i] = s.engineNetwork(v)
			}
		case "is-task":
			delete(f, key)
		}
	}
	return nil
}

// summary is one row of docker ps.
func (s *server) summary(c core.ListContainer, networkIDs map[string]string) containertypes.Summary {
	names := make([]string, len(c.Names))
	for i, n := range c.Names {
		names[i] = "/" + n
	}
	started := time.Unix(c.StartedAt, 0)
	var finished time.Time
	if c.ExitedAt > 0 {
		finished = time.Unix(c.ExitedAt, 0)
	}
	out := containertypes.Summary{
		ID:      c.ID,
		Names:   names,
		Image:   firstNonEmpty(c.RawImage, c.Image),
		ImageID: imageID(c.ImageID),
		Command: dockerCommand(c.Command),
		Created: c.Created.Unix(),
		Ports:   dockerPorts(c.Ports),
		Labels:  c.Labels,
		State:   dockerState(c.State),
		Status:  statusText(c.State, started, finished, c.ExitCode, c.Status),
		Mounts:  []containertypes.MountPoint{},
	}
	if c.Size != nil {
		out.SizeRw, out.SizeRootFs = c.Size.RwSize, c.Size.RootFsSize
	}
	out.NetworkSettings = &containertypes.NetworkSettingsSummary{Networks: map[string]*networkEndpoint{}}
	for _, n := range c.Networks {
		ep := &networkEndpoint{NetworkID: networkIDs[n]}
		if st, ok := c.NetworkDetails[n]; ok {
			fillEndpoint(ep, st)
		}
		out.NetworkSettings.Networks[s.dockerNetworkName(n)] = ep
	}
	out.HostConfig.NetworkMode = "default"
	if len(c.Networks) > 0 && c.Networks[0] != s.cfg.DefaultNetwork {
		out.HostConfig.NetworkMode = c.Networks[0]
	}
	if c.NetworkMode == "host" || c.NetworkMode == "none" {
		out.HostConfig.NetworkMode = c.NetworkMode
		predefinedEndpoint(out.NetworkSettings.Networks, c.NetworkMode, networkIDs)
	}
	for _, m := range c.MountDetails {
		out.Mounts = append(out.Mounts, mountPoint(m))
	}
	return out
}

// dockerCommand is a listed container's command line as dockerd writes
// it: the path, then each argument, quoted in single quotes where it holds
// a space.
func dockerCommand(cmd []string) string {
	words := make([]string, len(cmd))
	for i, w := range cmd {
		if i > 0 && strings.Contains(w, " ") {
			w = "'" + w + "'"
		}
		words[i] = w
	}
	return strings.Join(words, " ")
}

// dockerPorts lists published ports as Docker's ps does, one per port.
func dockerPorts(ports []core.PortMapping) []containertypes.Port {
	out := []containertypes.Port{}
	for _, p := range ports {
		n := max(int(p.Range), 1)
		for i := 0; i < n; i++ {
			for _, proto := range strings.Split(p.Protocol, ",") {
				if proto == "" {
					proto = "tcp"
				}
				ip := p.HostIP
				if ip == "" {
					ip = "0.0.0.0"
				}
				out = append(out, containertypes.Port{IP: ip, PrivatePort: p.ContainerPort + uint16(i), PublicPort: p.HostPort + uint16(i), Type: proto})
			}
		}
	}
	return out
}

// containerInspect answers docker inspect (the name with its leading /).
func (s *server) containerInspect(w http.ResponseWriter, r *http.Request) {
	out, err := s.inspectContainer(r.Context(), pathParam(r, "name"), queryOf(r).boolean("size", false))
	if err != nil {
		writeError(w, err)
		return
	}
	if versionBefore(r, "1.45") && out.NetworkSettings != nil {
		// Before 1.45 dockerd lists the container's short ID among its
		// aliases on each user-defined network (DNSNames came after);
		// Compose v1 takes a network without it for one to reconnect.
		for name, ep := range out.NetworkSettings.Networks {
			if ep != nil && name != "bridge" && !slices.Contains(ep.Aliases, out.ID[:12]) {
				ep.Aliases = append([]string{out.ID[:12]}, ep.Aliases...)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// containerStart starts a container; 304 when it runs already.
func (s *server) containerStart(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > 0 {
		var hc containertypes.HostConfig
		if err := decodeBody(r, &hc); err != nil {
			writeError(w, err)
			return
		}
		if len(hc.Binds) > 0 || len(hc.PortBindings) > 0 || hc.NetworkMode != "" {
			writeError(w, core.InvalidArgument("body", errors.New("a host config at start is not supported: give it at create")))
			return
		}
	}
	if k := r.URL.Query().Get("detachKeys"); k != "" {
		writeError(w, core.InvalidArgument("detachKeys", errors.New("detach keys are read at attach")))
		return
	}
	// docker start --checkpoint (dockerd's experimental checkpoints, which
	// this API does not serve): refused rather than started afresh.
	for _, name := range []string{"checkpoint", "checkpoint-dir"} {
		if r.URL.Query().Get(name) != "" {
			writeError(w, core.InvalidArgument(name, errors.New("starting from a checkpoint is not supported by the Docker API here; use the libpod API's restore (podman container restore)")))
			return
		}
	}
	s.lifecycle(w, r, func(ctx context.Context, name string) error {
		err := s.hostPortTaken(ctx, name)
		if err == nil {
			err = s.hostPortInDockerdWords(ctx, name, s.deps.Containers.Start(ctx, name))
		}
		if err == nil || errors.Is(err, core.ErrNotModified) {
			return err
		}
		// As Docker does, a container made with AutoRemove goes when its
		// start fails: it will never exit to be removed (docker run --rm
		// waits for that removal).
		if c, lerr := s.deps.Containers.Lookup(ctx, name); lerr == nil && c.Spec.Remove && c.State != core.StateRunning {
			if rerr := s.deps.Containers.Remove(ctx, c.ID, core.RemoveContainerOptions{Force: true, Volumes: true}); rerr != nil {
				s.logger.Warn("docker start: removing the auto-remove container after its failed start", "container", c.ID, "err", rerr)
			}
		}
		return err
	})
}

// stopTimeout reads t (Docker's seconds); nil keeps the container's own.
func stopTimeout(r *http.Request) (*uint, error) {
	q := queryOf(r)
	if !q.has("t") && !q.has("timeout") {
		return nil, nil
	}
	name := "t"
	if !q.has("t") {
		name = "timeout"
	}
	n := q.integer(name, 0)
	if q.err != nil {
		return nil, q.err
	}
	if n < 0 {
		// -1 waits forever in Docker; the engine's longest wait is used.
		n = 1 << 30
	}
	t := uint(n)
	return &t, nil
}

func (s *server) containerStop(w http.ResponseWriter, r *http.Request) {
	s.stopping(w, r, s.deps.Containers.StopWithSignal)
}

func (s *server) containerRestart(w http.ResponseWriter, r *http.Request) {
	s.stopping(w, r, s.deps.Containers.RestartWithSignal)
}

// stopping answers docker stop and restart: op with the query's t and
// signal.
func (s *server) stopping(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, name string, timeout *uint, signal string) error) {
	t, err := stopTimeout(r)
	if err != nil {
		writeError(w, err)
		return
	}
	sig := r.URL.Query().Get("signal")
	s.lifecycle(w, r, func(ctx context.Context, name string) error { return op(ctx, name, t, sig) })
}

func (s *server) containerKill(w http.ResponseWriter, r *http.Request) {
	sig := r.URL.Query().Get("signal")
	if sig == "" {
		sig = "KILL"
	}
	if _, err := parseSignal(sig); err != nil {
		// dockerd's words, which docker kill and compose kill print.
		writeMessage(w, http.StatusBadRequest, "Invalid signal: "+sig)
		return
	}
	name := pathParam(r, "name")
	c, ok := s.lookup(w, r, name)
	if !ok {
		return
	}
	if c.State != core.StateRunning && c.State != core.StatePaused {
		writeMessage(w, http.StatusConflict, fmt.Sprintf("Cannot kill container: %s: container %s is not running", name, c.ID))
		return
	}
	s.lifecycle(w, r, func(ctx context.Context, name string) error { return s.deps.Containers.Kill(ctx, name, sig) })
}

// containerPause and containerUnpause refuse a container in the wrong
// state in dockerd's words (409), which docker pause and compose pause
// print.
func (s *server) containerPause(w http.ResponseWriter, r *http.Request) {
	c, ok := s.lookup(w, r, pathParam(r, "name"))
	if !ok {
		return
	}
	if c.State == core.StatePaused {
		writeMessage(w, http.StatusConflict, fmt.Sprintf("Container %s is already paused", c.ID))
		return
	}
	if c.State != core.StateRunning {
		writeMessage(w, http.StatusConflict, fmt.Sprintf("Container %s is not running", c.ID))
		return
	}
	s.lifecycle(w, r, func(ctx context.Context, name string) error { return s.deps.Containers.Pause(ctx, name) })
}

func (s *server) containerUnpause(w http.ResponseWriter, r *http.Request) {
	c, ok := s.lookup(w, r, pathParam(r, "name"))
	if !ok {
		return
	}
	if c.State != core.StatePaused {
		writeMessage(w, http.StatusConflict, fmt.Sprintf("Container %s is not paused", c.ID))
		return
	}
	s.lifecycle(w, r, func(ctx context.Context, name string) error { return s.deps.Containers.Unpause(ctx, name) })
}

// lifecycle runs one state change and answers 204 (304 where the engine
// says there was nothing to do).
func (s *server) lifecycle(w http.ResponseWriter, r *http.Request, op func(context.Context, string) error) {
	finishStatus(w, http.StatusNoContent, op(r.Context(), pathParam(r, "name")))
}

// containerRemove answers docker rm.
func (s *server) containerRemove(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	opts := core.RemoveContainerOptions{Force: q.boolean("force", false), Volumes: q.boolean("v", false)}
	if opts.Force {
		// dockerd kills a running container it force-removes at once; it
		// does not wait for the stop signal's timeout.
		var now uint
		opts.Timeout = &now
	}
	if q.boolean("link", false) {
		writeError(w, core.InvalidArgument("link", errors.New("legacy links are not supported")))
		return
	}
	name := pathParam(r, "name")
	if !opts.Force {
		c, ok := s.lookup(w, r, name)
		if !ok {
			return
		}
		if c.State == core.StateRunning || c.State == core.StatePaused {
			writeMessage(w, http.StatusConflict, fmt.Sprintf("You cannot remove a %s container %s. Stop the container before attempting removal or force remove", dockerState(c.State.String()), c.ID))
			return
		}
	}
	finishStatus(w, http.StatusNoContent, s.deps.Containers.Remove(r.Context(), name, opts))
}

// containerWait answers Docker's wait: the status line at once (so a
// client may start the container next), then the exit code once the
// condition holds: not-running (the default), next-exit or removed.
func (s *server) containerWait(w http.ResponseWriter, r *http.Request) {
	cond := r.URL.Query().Get("condition")
	name := pathParam(r, "name")
	ctx := r.Context()
	c, err := s.deps.Containers.Lookup(ctx, name)
	if err != nil {
		writeError(w, err)
		return
	}
	var conditions []string
	switch cond {
	case "", "not-running":
		if c.State == core.StateConfigured || c.State == core.StateCreated {
			writeJSON(w, http.StatusOK, containertypes.WaitResponse{StatusCode: int64(c.ExitCode)})
			return
		}
		conditions = []string{"stopped", "exited"}
	case "next-exit", "removed":
		conditions = []string{"stopped", "exited"}
	default:
		writeError(w, core.InvalidArgument("condition", fmt.Errorf("%q", cond))) // dockerd: invalid condition: "X"
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	code, err := s.deps.Containers.Wait(ctx, c.ID, conditions)
	switch {
	case err == nil && cond == "removed":
		err = s.awaitRemoval(ctx, c.ID)
	case errors.Is(err, core.ErrNoSuchContainer) && cond == "removed":
		// Removed without an exit to report (its start failed).
		code, err = int32(c.ExitCode), nil
	}
	resp := containertypes.WaitResponse{StatusCode: int64(code)}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		resp.Error = &containertypes.WaitExitError{Message: err.Error()}
	}
	writeJSONLine(w, resp)
}

// awaitRemoval waits until the container is gone (auto-removal after exit).
func (s *server) awaitRemoval(ctx context.Context, id string) error {
	for {
		ok, err := s.deps.Containers.Exists(ctx, id)
		if err != nil || !ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// containerRename answers docker rename.
func (s *server) containerRename(w http.ResponseWriter, r *http.Request) {
	m, ok := s.deps.Containers.(core.ContainerMounts)
	if !ok {
		noRoute(w, r)
		return
	}
	name := strings.TrimPrefix(r.URL.Query().Get("name"), "/")
	if name == "" {
		writeError(w, core.InvalidArgument("name", errors.New("a new name is required")))
		return
	}
	finishStatus(w, http.StatusNoContent, m.Rename(r.Context(), pathParam(r, "name"), name))
}

// containerUpdate answers docker update: resources and restart policy.
func (s *server) containerUpdate(w http.ResponseWriter, r *http.Request) {
	var body containertypes.UpdateConfig
	if err := decodeBody(r, &body); err != nil {
		writeError(w, err)
		return
	}
	var spec core.ContainerSpec
	if err := resources(&spec, &body.Resources); err != nil {
		writeError(w, err)
		return
	}
	if len(spec.Rlimits) > 0 || len(spec.Devices) > 0 {
		writeError(w, core.InvalidArgument("body", errors.New("ulimits and devices cannot be updated")))
		return
	}
	// Per-device limits by path (docker update --device-read-bps ...),
	// which the update resolves as a create does; they were dropped before.
	opts := core.UpdateContainerOptions{Resources: spec.Resources,
		ThrottleReadBpsDevice: spec.ThrottleReadBpsDevice, ThrottleWriteBpsDevice: spec.ThrottleWriteBpsDevice,
		ThrottleReadIOPSDevice: spec.ThrottleReadIOPSDevice, ThrottleWriteIOPSDevice: spec.ThrottleWriteIOPSDevice}
	if body.RestartPolicy.Name != "" {
		if err := s.restartPolicy(&spec, body.RestartPolicy); err != nil {
			writeError(w, err)
			return
		}
		p := string(body.RestartPolicy.Name)
		opts.RestartPolicy, opts.RestartTries = &p, spec.RestartTries
	}
	if err := s.deps.Containers.Update(r.Context(), pathParam(r, "name"), opts); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, containertypes.UpdateResponse{Warnings: []string{}})
}

// containerPrune answers docker container prune.
func (s *server) containerPrune(w http.ResponseWriter, r *http.Request) {
	f, ok := filtersOf(w, r)
	if !ok {
		return
	}
	reports, err := s.deps.Containers.Prune(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	out := containertypes.PruneReport{ContainersDeleted: []string{}}
	for _, p := range reports {
		if p.Err != "" {
			continue
		}
		out.ContainersDeleted = append(out.ContainersDeleted, p.ID)
		out.SpaceReclaimed += p.Size
	}
	writeJSON(w, http.StatusOK, out)
}

// lookup finds the container nameOrID names; without one it answers the
// error and reports false.
func (s *server) lookup(w http.ResponseWriter, r *http.Request, nameOrID string) (*core.Container, bool) {
	c, err := s.deps.Containers.Lookup(r.Context(), nameOrID)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return c, true
}
