// Package commandtable keeps the README's table of podman commands true: its
// test runs every row with podman --remote 4.3.1 against a real berth-engine
// (real runc containers) and fails when a row marked "works" fails or a row
// marked "not yet" succeeds. The package has no code of its own.
package commandtable
