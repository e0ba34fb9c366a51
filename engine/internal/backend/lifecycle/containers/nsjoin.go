package containers

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// PID and UTS namespaces of another container (pidns/utsns
// container:NAME, podman's and Docker's --pid container:NAME and podman's
// --uts container:NAME): the joiner enters the donor's namespace when it
// starts; the donor is its dependency (started first) and is recorded by ID.
// A joiner of a PID namespace ends when the donor's init does (the kernel
// kills what is left in the namespace). A joiner of a UTS namespace has the
// donor's hostname. The IPC namespace has its own file (ipc.go): its
// /dev/shm goes along.

// joinedNS are the namespaces other than IPC that a container can join by
// container:NAME, with the request member that names each.
var joinedNS = []struct {
	field string
	typ   specs.LinuxNamespaceType
	file  string
	of    func(*core.ContainerSpec) *core.Namespace
}{
	{"pidns", specs.PIDNamespace, "pid", func(s *core.ContainerSpec) *core.Namespace { return &s.PidNS }},
	{"utsns", specs.UTSNamespace, "uts", func(s *core.ContainerSpec) *core.Namespace { return &s.UtsNS }},
}

// lookupDonor finds the container a request member names (a namespace to
// join, a dependency), as a 400 naming field, not the lookup's 404, when
// there is none.
func (m *Manager) lookupDonor(field, name string) (record, error) {
	e, err := m.lookup(name)
	if err != nil {
		return record{}, core.InvalidArgument(field, fmt.Errorf("container %q: %v", name, err))
	}
	return m.snapshot(e), nil
}

// resolveJoinedNS records the donors of pidns and utsns container:NAME by
// ID; a UTS joiner takes the donor's hostname.
func (m *Manager) resolveJoinedNS(spec *core.ContainerSpec) error {
	for _, j := range joinedNS {
		ns := j.of(spec)
		if ns.NSMode != core.NSContainer {
			continue
		}
		donor, err := m.lookupDonor(j.field, ns.Value)
		if err != nil {
			return err
		}
		ns.Value = donor.ID
		if j.typ == specs.UTSNamespace {
			spec.Hostname = hostnameOf(&donor)
		}
	}
	return nil
}

// namespaceDonors are the IDs of the containers whose PID or UTS namespace
// rec joins.
func namespaceDonors(rec *record) []string {
	var out []string
	for _, j := range joinedNS {
		if ns := j.of(&rec.Spec); ns.NSMode == core.NSContainer {
			out = append(out, ns.Value)
		}
	}
	return out
}

// joinDonorNamespaces adds to joins the PID and UTS namespaces rec joins by
// container:ID. A donor that does not run (at create) is skipped: the
// joiner's start prepares its spec again once the donor runs.
func (m *Manager) joinDonorNamespaces(rec *record, joins map[specs.LinuxNamespaceType]string) map[specs.LinuxNamespaceType]string {
	for _, j := range joinedNS {
		ns := j.of(&rec.Spec)
		if ns.NSMode != core.NSContainer {
			continue
		}
		e, err := m.lookup(ns.Value)
		if err != nil {
			continue
		}
		donor := m.snapshot(e)
		if (donor.State != core.StateRunning && donor.State != core.StatePaused) || donor.PID <= 0 {
			continue
		}
		if joins == nil {
			joins = map[specs.LinuxNamespaceType]string{}
		}
		joins[j.typ] = filepath.Join("/proc", strconv.Itoa(donor.PID), "ns", j.file)
	}
	return joins
}

// joinsOthers reports whether rec's spec names another container's
// namespace, which its start must prepare anew (the donor's process is
// another each run).
func joinsOthers(rec *record) bool {
	return rec.Spec.IpcNS.NSMode == core.IPCNSContainer || len(namespaceDonors(rec)) > 0
}

// nsModeString is how inspect names a namespace mode (PidMode, UTSMode,
// IpcMode, CgroupnsMode): unset for the default, container:ID, ns:PATH, or
// the mode.
func nsModeString(ns core.Namespace, unset string) string {
	switch ns.NSMode {
	case "":
		return unset
	case core.NSContainer:
		return "container:" + ns.Value
	case core.CgroupNSPath:
		return "ns:" + ns.Value
	}
	return ns.NSMode
}

// checkNamespacePaths refuses, at create, an ns:PATH mode whose path does
// not exist (runc would fail only at start).
func checkNamespacePaths(spec *core.ContainerSpec) error {
	for field, ns := range map[string]core.Namespace{"pidns": spec.PidNS, "utsns": spec.UtsNS, "ipcns": spec.IpcNS} {
		if ns.NSMode != core.NSPath {
			continue
		}
		if _, err := os.Stat(ns.Value); err != nil {
			return core.InvalidArgument(field, fmt.Errorf("namespace path %s: %v", ns.Value, err))
		}
	}
	return nil
}
