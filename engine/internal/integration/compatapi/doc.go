// Package compatapi tests the details of the libpod API that Podman's
// clients rely on beyond each capability's own tests: waits on containers
// already removed, commit's JSON configuration, Podman's annotations in
// inspect, the stats entries, X-Reference-Id and the error words clients
// match on, against a real engine on a loopback listener and the podman
// 4.3.1 client. It has no code of its own.
package compatapi
