package dockerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	buildtypes "github.com/docker/docker/api/types/build"

	"github.com/berth-project/berth/engine/internal/core"
)

// build answers docker build (the classic builder's API): a tar context
// in the body, the options in the query, Docker's JSON stream out with the
// image ID as aux.
func (s *server) build(w http.ResponseWriter, r *http.Request) {
	opts, err := buildOptions(queryOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	// The build streams its output while it still reads the context.
	_ = http.NewResponseController(w).EnableFullDuplex()
	defer finishBody(r)
	js := startJSONStream(w)
	opts.Progress = streamWriter{js}
	id, err := s.deps.Build.Build(r.Context(), r.Body, opts)
	if err != nil {
		js.fail(err)
		return
	}
	js.send(progressMessage{Aux: map[string]string{"ID": imageID(id)}})
	if opts.Quiet {
		// dockerd's quiet build says only the image's ID, which the CLI
		// prints as it comes: IMG=$(docker build -q .) is the ID.
		js.send(progressMessage{Stream: imageID(id) + "\n"})
		return
	}
	short := strings.TrimPrefix(imageID(id), "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	// The builder's output already names the tags it committed.
	js.send(progressMessage{Stream: "Successfully built " + short + "\n"})
}

// finishBody reads what is left of a full-duplex request's body (a build
// context's tar padding after its end marker) and closes it. A handler in
// full-duplex mode that returns before its body's end makes net/http
// panic on the connection's next request ("invalid concurrent Body.Read
// call", golang/go#68560), as docker-py's keep-alive connections found.
// More than a little left over is not read: the connection is closed
// rather than reused.
func finishBody(r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	_ = r.Body.Close()
}

// streamWriter sends build output as {"stream": ...} lines.
type streamWriter struct{ js *jsonStream }

func (sw streamWriter) Write(p []byte) (int, error) {
	sw.js.send(progressMessage{Stream: string(p)})
	return len(p), nil
}

// buildPrune answers docker builder prune (and the build cache part of
// docker system prune): all and the until filter pass to the builder's cache
// prune. The size targets (keep-storage, reserved-space, max-used-space,
// min-free-space) are refused: the engine removes what qualifies, all of it.
func (s *server) buildPrune(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	all := q.boolean("all", false)
	filters := q.filters()
	for _, name := range []string{"keep-storage", "reserved-space", "max-used-space", "min-free-space"} {
		if q.integer(name, 0) != 0 && q.err == nil {
			q.err = core.InvalidArgument(name, errors.New("the engine does not keep part of its build cache by size: prune all that qualifies, or narrow it with the until filter"))
		}
	}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	rep, err := s.deps.Build.PruneCache(r.Context(), core.BuildCachePruneOptions{All: all, Filters: filters})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, buildtypes.CachePruneReport{CachesDeleted: rep.CachesDeleted, SpaceReclaimed: rep.SpaceReclaimed})
}

// buildOptions translates the query of Docker's build request into the
// builder's options; what the builder cannot honour is a 400 naming the
// parameter.
func buildOptions(q *query) (core.BuildOptions, error) {
	opts := core.BuildOptions{
		Tags:    dockerHubNames(q.v["t"]),
		Target:  q.str("target"),
		NoCache: q.boolean("nocache", false),
		Quiet:   q.boolean("q", false),
		Layers:  true,
		Format:  "docker",
		Network: core.BuildNetworkPrivate,
	}
	if df := q.str("dockerfile"); df != "" {
		opts.Containerfiles = []string{df}
	}
	if q.boolean("pull", false) {
		opts.PullPolicy = core.PullAlways
	} else {
		opts.PullPolicy = core.PullMissing
	}
	for _, p := range []struct {
		name string
		dst  any
	}{{"buildargs", &map[string]*string{}}, {"labels", &map[string]string{}}} {
		raw := q.str(p.name)
		if raw == "" {
			continue
		}
		if err := json.Unmarshal([]byte(raw), p.dst); err != nil {
			return core.BuildOptions{}, core.InvalidArgument(p.name, err)
		}
		switch v := p.dst.(type) {
		case *map[string]*string:
			opts.BuildArgs = map[string]string{}
			for k, val := range *v {
				if val != nil {
					opts.BuildArgs[k] = *val
				}
			}
		case *map[string]string:
			for k, val := range *v {
				opts.Labels = append(opts.Labels, k+"="+val)
			}
		}
	}
	switch nm := q.str("networkmode"); nm {
	case "", "default", "bridge":
	case "host":
		opts.Network = core.BuildNetworkHost
	case "none":
	default:
		return core.BuildOptions{}, core.InvalidArgument("networkmode", fmt.Errorf("network mode %q is not supported for builds", nm))
	}
	if eh := q.str("extrahosts"); eh != "" {
		opts.ExtraHosts = strings.Split(eh, ",")
	}
	for _, unsupported := range []string{"remote", "cachefrom", "cpusetcpus", "cpusetmems", "isolation", "squash", "outputs", "cgroupparent", "securityopt"} {
		if v := q.str(unsupported); v != "" && v != "[]" && v != "null" {
			return core.BuildOptions{}, core.InvalidArgument(unsupported, fmt.Errorf("%s is not supported by Berth's builder", unsupported))
		}
	}
	if p := q.str("platform"); p != "" && p != "linux" && !strings.HasPrefix(p, "linux/") {
		return core.BuildOptions{}, core.InvalidArgument("platform", fmt.Errorf("%q: only linux images are built here", p))
	}
	if v := q.str("version"); v == "2" {
		return core.BuildOptions{}, core.InvalidArgument("version", errors.New("BuildKit is not supported: use the classic builder (DOCKER_BUILDKIT=0)"))
	}
	if mem := q.integer("memory", 0); mem > 0 {
		opts.Memory = mem
	}
	// RUN steps get no CPU weight or swap limit of their own: refused
	// rather than ignored.
	for _, name := range []string{"cpushares", "memswap"} {
		if v := q.integer(name, 0); v != 0 {
			return core.BuildOptions{}, core.InvalidArgument(name, fmt.Errorf("%s is not supported by Berth's builder", name))
		}
	}
	if raw := q.str("ulimits"); raw != "" && raw != "null" {
		var limits []struct {
			Name       string
			Soft, Hard int64
		}
		if err := json.Unmarshal([]byte(raw), &limits); err != nil {
			return core.BuildOptions{}, core.InvalidArgument("ulimits", err)
		}
		for _, l := range limits {
			opts.Ulimits = append(opts.Ulimits, fmt.Sprintf("%s=%d:%d", l.Name, l.Soft, l.Hard))
		}
	}
	if shm := q.integer("shmsize", 0); shm > 0 {
		opts.ShmSize = shm
	}
	opts.CPUQuota = q.integer("cpuquota", 0)
	if period := q.integer("cpuperiod", 0); period > 0 {
		opts.CPUPeriod = uint64(period)
	}
	if q.err != nil {
		return core.BuildOptions{}, q.err
	}
	return opts, nil
}
