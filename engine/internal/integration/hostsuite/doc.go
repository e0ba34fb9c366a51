// Package hostsuite holds the engine's host suite: the tests whose outcome
// depends on the host rather than on the engine alone — the cgroup version
// and its controllers, systemd, the kernel's OOM handling, bridge
// networking. They run here (hybrid cgroup v1, no systemd) with the other
// engine tests, and in the host lab (hack/hostlab.sh, make test-hosts): a
// Debian 12 VM with systemd as PID 1 and the unified cgroup v2 hierarchy,
// into which the compiled test binary and a static berth-engine are copied
// (BERTH_ENGINE_BIN names it there; here the tests build it).
package hostsuite
