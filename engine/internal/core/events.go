package core

import "context"

// EventType names the kind of object an event is about, as Podman's event
// stream names it (the wire's "Type").
type EventType string

// The object kinds events are recorded for.
const (
	EventContainer EventType = "container"
	EventImage     EventType = "image"
	EventPod       EventType = "pod"
	EventVolume    EventType = "volume"
	EventNetwork   EventType = "network"
	EventSecret    EventType = "secret"
	EventSystem    EventType = "system"
)

// Event is something that happened to an object, reported by the backend
// that did it: Action is Podman's status word ("create", "remove", "pull",
// "tag", "connect", ...), ID and Name identify the object, Image is the
// image involved (for container and pod events), Attributes are extra
// actor attributes (labels, "driver", a network event's "container").
type Event struct {
	Type       EventType
	Action     string
	ID         string
	Name       string
	Image      string
	Attributes map[string]string
}

// EventSink records events; the engine's event bus implements it. Emit
// never fails the caller's operation: a recording failure is logged by the
// sink. Backends call it after the change is committed.
type EventSink interface {
	Emit(ctx context.Context, e Event)
}

// EventSinkFunc adapts a function to EventSink.
type EventSinkFunc func(ctx context.Context, e Event)

// Emit calls f.
func (f EventSinkFunc) Emit(ctx context.Context, e Event) { f(ctx, e) }

// NoEvents is an EventSink that drops every event (for tests of one layer).
var NoEvents EventSink = EventSinkFunc(func(context.Context, Event) {})
