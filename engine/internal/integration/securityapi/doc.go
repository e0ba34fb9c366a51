// Package securityapi tests how the engine confines containers — the
// seccomp filter, capabilities, masked kernel paths, no_new_privs — with
// real runc containers and the podman 4.3.1 client, including a container
// that tries what an attacker would. It has no code of its own.
package securityapi
