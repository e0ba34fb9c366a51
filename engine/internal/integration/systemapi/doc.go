// Package systemapi tests the system routes (disk usage, prune, check),
// the event stream of every object kind and the API's wire conventions
// against a real engine on a loopback listener. It has no code of its own.
package systemapi
