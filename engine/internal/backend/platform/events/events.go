// Package events records what happens in the engine (container lifecycle,
// exec sessions, healthchecks) and serves it as Podman's event stream:
// every event is persisted in the state database, then handed to live
// subscribers.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// Event types and the statuses the engine emits beyond core's container
// event types, named as Podman names them.
const (
	TypeContainer = "container"
	TypeImage     = "image"
	TypePod       = "pod"
	TypeVolume    = "volume"
	TypeNetwork   = "network"
	TypeSecret    = "secret"
	TypeSystem    = "system"

	StatusExec         = "exec"
	StatusExecDied     = "exec_died"
	StatusAttach       = "attach"
	StatusHealthStatus = "health_status"
)

// Event is one thing that happened.
type Event struct {
	// Seq orders events; assigned when the event is stored.
	Seq          int64     `json:"-"`
	Type         string    `json:"type"`
	Status       string    `json:"status"`
	ID           string    `json:"id"`
	Name         string    `json:"name,omitempty"`
	Image        string    `json:"image,omitempty"`
	Time         time.Time `json:"time"`
	ExitCode     int       `json:"exitCode,omitempty"`
	HealthStatus string    `json:"healthStatus,omitempty"`
	// HealthLog is the newest healthcheck result (its JSON) of a container
	// whose healthcheck log destination is events_logger; HealthFailingStreak
	// its failing streak then.
	HealthLog           string            `json:"healthLog,omitempty"`
	HealthFailingStreak int               `json:"healthFailingStreak,omitempty"`
	Attributes          map[string]string `json:"attributes,omitempty"`
	// Facts Docker's messages carry and Podman's do not (the libpod
	// message leaves them out): a network event's network ID and driver,
	// a volume's driver, an exec session's command line, and how many
	// whole seconds a died container ran.
	NetworkID string `json:"networkId,omitempty"`
	// HealthChanged marks a health_status event whose status differs from
	// the one before the check (dockerd words only those).
	HealthChanged bool `json:"healthChanged,omitempty"`
	// DockerImage is a container's image as its create request named it;
	// DockerOnly marks an event only Docker's stream sends (see
	// core.ContainerEvent).
	DockerImage string `json:"dockerImage,omitempty"`
	DockerOnly  bool   `json:"dockerOnly,omitempty"`
	Driver      string `json:"driver,omitempty"`
	Command     string `json:"command,omitempty"`
	RunSeconds  *int64 `json:"runSeconds,omitempty"`
}

// Actor is the object an event is about, in the wire shape.
type Actor struct {
	ID         string            `json:"ID"`
	Attributes map[string]string `json:"Attributes"`
}

// Message is an event as Podman's API sends it (Docker's message fields plus
// HealthStatus); podman --remote decodes exactly these names.
type Message struct {
	Status       string `json:"status,omitempty"`
	ID           string `json:"id,omitempty"`
	From         string `json:"from,omitempty"`
	Type         string `json:"Type"`
	Action       string `json:"Action"`
	Actor        Actor  `json:"Actor"`
	Scope        string `json:"scope,omitempty"`
	Time         int64  `json:"time,omitempty"`
	TimeNano     int64  `json:"timeNano,omitempty"`
	HealthStatus string `json:"HealthStatus,omitempty"`
	// Podman 5's health_status events add the newest result and the
	// failing streak.
	HealthLog           string `json:"HealthLog,omitempty"`
	HealthFailingStreak int    `json:"HealthFailingStreak,omitempty"`
}

// Message converts e to its wire shape. Podman clients need the image, name,
// containerExitCode and podId attributes on every event.
func (e Event) Message() Message {
	attrs := make(map[string]string, len(e.Attributes)+4)
	maps.Copy(attrs, e.Attributes)
	attrs["image"] = e.Image
	attrs["name"] = e.Name
	attrs["containerExitCode"] = strconv.Itoa(e.ExitCode)
	if _, ok := attrs["podId"]; !ok {
		attrs["podId"] = ""
	}
	return Message{
		Status:       e.Status,
		ID:           e.ID,
		From:         e.Image,
		Type:         e.Type,
		Action:       e.Status,
		Actor:        Actor{ID: e.ID, Attributes: attrs},
		Scope:        "local",
		Time:         e.Time.Unix(),
		TimeNano:     e.Time.UnixNano(),
		HealthStatus: e.HealthStatus,
		HealthLog:    e.HealthLog, HealthFailingStreak: e.HealthFailingStreak,
	}
}

// Store persists events; *state.DB implements it.
type Store interface {
	AppendEvent(ctx context.Context, e state.EventRecord) (int64, error)
	ListEvents(ctx context.Context, since, until time.Time) ([]state.EventRecord, error)
}

// subscriberBuffer is how many events a slow reader may lag behind before
// it is dropped (its stream ends).
const subscriberBuffer = 512

// Bus stores events and fans them out to live readers.
type Bus struct {
	store  Store
	logger *slog.Logger

	mu   sync.Mutex
	subs map[*subscriber]struct{}

	metrics *busMetrics
}

type subscriber struct {
	ch      chan Event
	dropped bool
}

// NewBus returns a bus persisting to store.
func NewBus(store Store, logger *slog.Logger) *Bus {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Bus{store: store, logger: logger, subs: map[*subscriber]struct{}{}, metrics: newBusMetrics()}
}

// Publish stores e and delivers it to live readers. A zero Time is now.
func (b *Bus) Publish(ctx context.Context, e Event) error {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// Storing under the lock keeps live delivery in sequence order.
	seq, err := b.store.AppendEvent(context.WithoutCancel(ctx), state.EventRecord{
		Time: e.Time, Type: e.Type, Action: e.Status, ActorID: e.ID, Name: e.Name, Data: data,
	})
	if err != nil {
		return fmt.Errorf("store event: %w", err)
	}
	e.Seq = seq
	b.metrics.observe(e)
	for s := range b.subs {
		select {
		case s.ch <- e:
		default:
			s.dropped = true
			b.metrics.dropped.Inc()
			close(s.ch)
			delete(b.subs, s)
		}
	}
	return nil
}

// ContainerHook records container lifecycle changes; register it with
// core.Containers.Subscribe.
func (b *Bus) ContainerHook(ctx context.Context, ev core.ContainerEvent) {
	e := Event{
		Type:        TypeContainer,
		Status:      string(ev.Type),
		ID:          ev.ID,
		Name:        ev.Name,
		Image:       ev.Image,
		Time:        ev.Time,
		Attributes:  map[string]string{},
		DockerImage: ev.RawImage,
		DockerOnly:  ev.DockerOnly,
	}
	maps.Copy(e.Attributes, ev.Labels)
	maps.Copy(e.Attributes, ev.Attributes)
	if ev.ExitCode != nil {
		e.ExitCode = int(*ev.ExitCode)
	}
	if ev.Ran != nil {
		secs := int64(ev.Ran.Seconds())
		e.RunSeconds = &secs
	}
	if err := b.Publish(ctx, e); err != nil {
		b.logger.Error("recording container event", "container", ev.ID, "event", ev.Type, "err", err)
	}
}

// ReadOptions select the events Read delivers.
type ReadOptions struct {
	Filter Filter
	// Since and Until bound the events by time (zero: open).
	Since, Until time.Time
	// Stream keeps delivering new events until ctx ends or Until passes.
	// Without Since or Until a stream starts with new events only.
	Stream bool
	// Docker includes the events only Docker's stream sends (DockerOnly).
	Docker bool
}

// Read delivers past and (when streaming) live events matching opts.
func (b *Bus) Read(ctx context.Context, opts ReadOptions, emit func(Event) error) error {
	var sub *subscriber
	if opts.Stream {
		sub = &subscriber{ch: make(chan Event, subscriberBuffer)}
		b.mu.Lock()
		b.subs[sub] = struct{}{}
		b.mu.Unlock()
		defer b.unsubscribe(sub)
	}
	match := func(e Event) bool {
		if e.DockerOnly && !opts.Docker {
			return false
		}
		if !opts.Since.IsZero() && e.Time.Before(opts.Since) {
			return false
		}
		if !opts.Until.IsZero() && !e.Time.Before(opts.Until) {
			return false
		}
		return opts.Filter.Match(e)
	}

	var lastSeq int64
	if !opts.Stream || !opts.Since.IsZero() || !opts.Until.IsZero() {
		records, err := b.store.ListEvents(ctx, opts.Since, opts.Until)
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		for _, r := range records {
			var e Event
			if err := json.Unmarshal(r.Data, &e); err != nil {
				continue
			}
			e.Seq = r.Seq
			lastSeq = r.Seq
			if match(e) {
				if err := emit(e); err != nil {
					return err
				}
			}
		}
	}
	if !opts.Stream {
		return nil
	}
	var untilC <-chan time.Time
	if !opts.Until.IsZero() {
		timer := time.NewTimer(time.Until(opts.Until))
		defer timer.Stop()
		untilC = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-untilC:
			return nil
		case e, ok := <-sub.ch:
			if !ok {
				return fmt.Errorf("event reader fell too far behind")
			}
			if e.Seq <= lastSeq || !match(e) {
				continue
			}
			if err := emit(e); err != nil {
				return err
			}
		}
	}
}

func (b *Bus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.ch)
	}
}

// ExecEvent records the start ("exec") or end ("exec_died") of an exec
// session in container c running command.
func (b *Bus) ExecEvent(ctx context.Context, c *core.Container, sessionID string, command []string, status string, exitCode int) {
	e := Event{
		Type:       TypeContainer,
		Status:     status,
		ID:         c.ID,
		Name:       c.Name,
		Image:      c.Image,
		ExitCode:   exitCode,
		Attributes: map[string]string{"execID": sessionID},
		Command:    strings.Join(command, " "),
	}
	maps.Copy(e.Attributes, c.Spec.Labels)
	if err := b.Publish(ctx, e); err != nil {
		b.logger.Error("recording exec event", "container", c.ID, "session", sessionID, "err", err)
	}
}

// healthBefore is c's health status before a check: a container whose
// checks have not yet answered is starting.
func healthBefore(c *core.Container) string {
	if c.Health.Status == "" {
		return "starting"
	}
	return c.Health.Status
}

// HealthEvent records container c's health after a healthcheck (its status
// "healthy", "unhealthy" or "starting") as a health_status event; c is the
// container as it was before the check, so the event tells whether the
// status changed. As in Podman 5, a container whose healthcheck log
// destination is events_logger has the newest result (its JSON) and the
// failing streak in the event.
func (b *Bus) HealthEvent(ctx context.Context, c *core.Container, health core.HealthCheckResults) {
	e := Event{
		Type:          TypeContainer,
		Status:        StatusHealthStatus,
		ID:            c.ID,
		Name:          c.Name,
		Image:         c.Image,
		HealthStatus:  health.Status,
		HealthChanged: healthBefore(c) != health.Status,
		Attributes:    map[string]string{},
	}
	if c.Spec.HealthLogDestination == core.HealthLogEventsLogger {
		e.HealthFailingStreak = health.FailingStreak
		if n := len(health.Log); n > 0 {
			if data, err := json.Marshal(health.Log[n-1]); err == nil {
				e.HealthLog = string(data)
			}
		}
	}
	maps.Copy(e.Attributes, c.Spec.Labels)
	if err := b.Publish(ctx, e); err != nil {
		b.logger.Error("recording health event", "container", c.ID, "err", err)
	}
}

// Emit records an event reported by a backend (core.EventSink); the time
// is now.
func (b *Bus) Emit(ctx context.Context, ev core.Event) {
	e := Event{
		Type:       string(ev.Type),
		Status:     ev.Action,
		ID:         ev.ID,
		Name:       ev.Name,
		Image:      ev.Image,
		Time:       time.Now(),
		Attributes: map[string]string{},
	}
	maps.Copy(e.Attributes, ev.Attributes)
	if err := b.Publish(ctx, e); err != nil {
		b.logger.Error("recording event", "type", ev.Type, "id", ev.ID, "event", ev.Action, "err", err)
	}
}

// VolumeEvent records that a volume of driver was created or removed.
func (b *Bus) VolumeEvent(ctx context.Context, action, name, driver string) {
	e := Event{Type: TypeVolume, Status: action, ID: name, Name: name, Time: time.Now(), Attributes: map[string]string{}, Driver: driver}
	if err := b.Publish(ctx, e); err != nil {
		b.logger.Error("recording volume event", "volume", name, "event", action, "err", err)
	}
}

// PodEvent records a pod's create, start, stop, kill, pause, unpause or remove.
func (b *Bus) PodEvent(ctx context.Context, action, id, name string) {
	e := Event{Type: TypePod, Status: action, ID: id, Name: name, Time: time.Now(), Attributes: map[string]string{}}
	if err := b.Publish(ctx, e); err != nil {
		b.logger.Error("recording pod event", "pod", id, "event", action, "err", err)
	}
}

// NetworkEvent records a network's create or remove, or a container's
// connect or disconnect (container and containerName set), as Podman
// reports them: a connect names the container, with the network's name in
// the network attribute.
func (b *Bus) NetworkEvent(ctx context.Context, action string, n *core.Network, container, containerName string) {
	e := Event{Type: TypeNetwork, Status: action, ID: n.ID, Name: n.Name, Time: time.Now(),
		Attributes: map[string]string{"network": n.Name}, NetworkID: n.ID, Driver: n.Driver}
	if container != "" {
		e.ID, e.Name = container, containerName
	}
	if err := b.Publish(ctx, e); err != nil {
		b.logger.Error("recording network event", "network", n.Name, "event", action, "err", err)
	}
}
