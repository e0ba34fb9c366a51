// Package imagesapi holds the integration tests of the engine's system and
// image metadata API: they start the real engine (real containers/storage on
// the local disk) behind a real listener, load images built by
// engine/testimage, and drive it with HTTP and with podman --remote.
package imagesapi
