// Package transfertest holds the integration tests of the image transfer
// operations: the imagestore backend against a real containers/storage and a
// real registry, the HTTP routes through the engine's handlers, the real
// berth-engine binary killed mid-transfer, and Podman's remote client. It has
// no code of its own; its benchmarks compare the engine with Podman.
package transfertest
