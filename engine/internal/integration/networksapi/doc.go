// Package networksapi tests the engine's networks end to end: the real
// engine on a loopback listener, real containers under runc, netavark and
// aardvark-dns, and the podman 4.3.1 client where it is installed. Every
// test engine gets bridge names and subnets of its own.
package networksapi
