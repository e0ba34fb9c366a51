// Package dockercli tests Docker's Engine API with real Docker clients:
// the docker CLI (Debian's docker.io) run against an in-process engine over
// DOCKER_HOST, with podman --remote looking at the same objects. The
// package has no code of its own.
package dockercli
