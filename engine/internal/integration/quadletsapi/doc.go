// Package quadletsapi holds the HTTP tests of the engine's quadlet and
// generate-systemd routes against a real engine; it has no non-test code.
package quadletsapi
