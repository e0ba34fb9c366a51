package dockerapi

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	eventtypes "github.com/docker/docker/api/types/events"

	"github.com/berth-project/berth/engine/internal/backend/platform/events"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// events streams the engine's events in Docker's message format.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	raw := q.filters()
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	for i, v := range raw["event"] {
		raw["event"][i] = engineAction(v)
	}
	filter, err := events.ParseFilter(raw)
	if err != nil {
		writeError(w, core.InvalidArgument("filters", err))
		return
	}
	opts := events.ReadOptions{Filter: filter, Stream: true, Docker: true}
	now := time.Now()
	if v := q.str("since"); v != "" {
		if opts.Since, err = parseTime(v, now); err != nil {
			writeError(w, core.InvalidArgument("since", err))
			return
		}
	}
	if v := q.str("until"); v != "" {
		if opts.Until, err = parseTime(v, now); err != nil {
			writeError(w, core.InvalidArgument("until", err))
			return
		}
	}
	enc, rc := httpwire.BeginJSONLines(w)
	err = s.deps.Events.Read(r.Context(), opts, func(e events.Event) error {
		msg, ok := dockerEvent(e)
		if !ok {
			return nil
		}
		if err := enc.Encode(msg); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && r.Context().Err() == nil {
		s.logger.Debug("docker event stream ended", "err", err)
	}
}

// dockerAction is Docker's name for an engine event's action (a removed
// container, network or volume is "destroy", a removed image "delete", a
// loaded one "load"); ok is false for the engine's own steps that Docker has
// no event for (init, cleanup).
func dockerAction(typ, action, health string) (string, bool) {
	switch {
	case typ == "image" && action == "remove":
		return "delete", true
	case typ == "image" && action == "loadfromarchive":
		return "load", true
	case (typ == "network" || typ == "volume") && action == "remove":
		return "destroy", true
	case typ != "container":
		return action, true
	}
	switch action {
	case "died":
		return "die", true
	case "remove":
		return "destroy", true
	case "init", "cleanup", "sync":
		return "", false
	case "exec":
		return "exec_start", true
	case "exec_died":
		return "exec_die", true
	case "health_status":
		if health != "" {
			return "health_status: " + health, true
		}
	}
	return action, true
}

// engineAction is the engine's name for a Docker event action in filters.
func engineAction(action string) string {
	switch action {
	case "die":
		return "died"
	case "destroy", "delete":
		return "remove"
	case "load":
		return "loadfromarchive"
	case "exec_die":
		return "exec_died"
	}
	if strings.HasPrefix(action, "health_status") {
		return "health_status"
	}
	if strings.HasPrefix(action, "exec_start") {
		return "exec"
	}
	return action
}

// dockerEvent is engine event e as dockerd words it; ok is false for
// events Docker has none for. The actor's attributes are dockerd's: a
// container's labels, image and name (a died container's exitCode, an
// exec's execID, a kill's signal, a rename's oldName), an image's name, a
// network's name and driver ("type", and the container of a connect), a
// volume's driver. Podman's own attributes (containerExitCode, podId) stay
// on the libpod stream. The deprecated status, id and from are set for
// containers and images only, as dockerd sets them.
func dockerEvent(e events.Event) (eventtypes.Message, bool) {
	action, ok := dockerAction(e.Type, e.Status, e.HealthStatus)
	if !ok {
		return eventtypes.Message{}, false
	}
	if e.Status == events.StatusHealthStatus && !e.HealthChanged {
		// dockerd words a health change, not every check (Podman words
		// every check): a client that acts on events (Traefik reloads)
		// is not woken at each interval.
		return eventtypes.Message{}, false
	}
	if action == "exec_start" && e.Command != "" {
		action += ": " + e.Command
	}
	id := e.ID
	attrs := map[string]string{}
	switch e.Type {
	case events.TypeContainer:
		for k, v := range e.Attributes {
			if k != "podId" {
				attrs[k] = v
			}
		}
		attrs["image"], attrs["name"] = firstNonEmpty(e.DockerImage, e.Image), e.Name
		if action == "die" || action == "exec_die" {
			attrs["exitCode"] = strconv.Itoa(e.ExitCode)
		}
		if action == "die" && e.RunSeconds != nil {
			attrs["execDuration"] = strconv.FormatInt(*e.RunSeconds, 10)
		}
	case events.TypeNetwork:
		// The engine's connect is about the container, dockerd's about
		// the network.
		if e.NetworkID != "" {
			id = e.NetworkID
		}
		attrs["name"] = e.Attributes["network"]
		if attrs["name"] == "" {
			attrs["name"] = e.Name
		}
		if e.Driver != "" {
			attrs["type"] = e.Driver
		}
		if action == "connect" || action == "disconnect" {
			attrs["container"] = e.ID
		}
	case events.TypeVolume:
		if e.Driver != "" {
			attrs["driver"] = e.Driver
		}
	default:
		maps.Copy(attrs, e.Attributes)
		attrs["name"] = e.Name
	}
	msg := eventtypes.Message{
		Type: eventtypes.Type(e.Type), Action: eventtypes.Action(action),
		Actor: eventtypes.Actor{ID: id, Attributes: attrs},
		Scope: "local", Time: e.Time.Unix(), TimeNano: e.Time.UnixNano(),
	}
	switch e.Type {
	case events.TypeContainer:
		msg.Status, msg.ID, msg.From = action, id, e.Image
	case events.TypeImage:
		msg.Status, msg.ID = action, id
	}
	return msg, true
}
