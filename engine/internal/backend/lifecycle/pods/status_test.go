package pods

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestStatus(t *testing.T) {
	const (
		run = core.StateRunning
		pau = core.StatePaused
		exi = core.StateExited
		stp = core.StateStopped
		cre = core.StateCreated
		cfg = core.StateConfigured
		rem = core.StateRemoving
	)
	cases := []struct {
		states []core.ContainerState
		want   string
	}{
		{nil, core.PodStateCreated},
		{[]core.ContainerState{cfg}, core.PodStateCreated},
		{[]core.ContainerState{cfg, cre}, core.PodStateCreated},
		{[]core.ContainerState{run}, core.PodStateRunning},
		{[]core.ContainerState{run, run}, core.PodStateRunning},
		{[]core.ContainerState{run, cfg}, core.PodStateDegraded},
		{[]core.ContainerState{run, exi}, core.PodStateDegraded},
		{[]core.ContainerState{run, pau}, core.PodStateDegraded},
		{[]core.ContainerState{pau, pau}, core.PodStatePaused},
		{[]core.ContainerState{pau, cfg}, core.PodStateCreated},
		{[]core.ContainerState{exi, stp}, core.PodStateExited},
		{[]core.ContainerState{exi, cfg}, core.PodStateStopped},
		{[]core.ContainerState{exi, pau}, core.PodStateStopped},
		{[]core.ContainerState{rem, cfg}, core.PodStateErrored},
	}
	for _, c := range cases {
		if got := Status(c.states); got != c.want {
			t.Errorf("Status(%v) = %s, want %s", c.states, got, c.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	yes := true
	cases := []struct {
		name  string
		spec  core.PodSpec
		field string // "" = accepted
		check func(t *testing.T, s core.PodSpec)
	}{
		{name: "defaults", spec: core.PodSpec{}, check: func(t *testing.T, s core.PodSpec) {
			if s.ExitPolicy != "continue" || strings.Join(s.SharedNamespaces, ",") != "ipc,net,uts" || s.ShareParent == nil || !*s.ShareParent {
				t.Fatalf("defaults not applied: %+v", s)
			}
		}},
		{name: "share list", spec: core.PodSpec{SharedNamespaces: []string{"net,pid", "ipc"}}, check: func(t *testing.T, s core.PodSpec) {
			if strings.Join(s.SharedNamespaces, ",") != "net,pid,ipc" {
				t.Fatalf("shared %v", s.SharedNamespaces)
			}
		}},
		{name: "share none", spec: core.PodSpec{SharedNamespaces: []string{"none"}}, check: func(t *testing.T, s core.PodSpec) {
			if len(s.SharedNamespaces) != 0 {
				t.Fatalf("shared %v", s.SharedNamespaces)
			}
		}},
		{name: "share cgroup", spec: core.PodSpec{SharedNamespaces: []string{"cgroup"}}, field: "shared_namespaces"},
		{name: "bad name", spec: core.PodSpec{Name: "-x"}, field: "name"},
		{name: "bad hostname", spec: core.PodSpec{Hostname: "a b"}, field: "hostname"},
		{name: "exit policy", spec: core.PodSpec{ExitPolicy: "restart"}, field: "exit_policy"},
		{name: "exit stop", spec: core.PodSpec{ExitPolicy: "stop"}},
		{name: "ports", spec: core.PodSpec{PortMappings: []core.PortMapping{{ContainerPort: 80}}}},
		{name: "ports without infra", spec: core.PodSpec{NoInfra: true, PortMappings: []core.PortMapping{{ContainerPort: 80}}}, field: "portmappings"},
		{name: "networks without infra", spec: core.PodSpec{NoInfra: true, Networks: map[string]core.PerNetworkOptions{"n1": {}}}, field: "Networks"},
		{name: "netns bridge", spec: core.PodSpec{NetNS: core.Namespace{NSMode: "bridge"}}},
		{name: "netns slirp4netns", spec: core.PodSpec{NetNS: core.Namespace{NSMode: "slirp4netns"}}, field: "netns"},
		{name: "netns none", spec: core.PodSpec{NetNS: core.Namespace{NSMode: "none"}}},
		{name: "pidns path", spec: core.PodSpec{PidNS: core.Namespace{NSMode: "path", Value: "/x"}}, field: "pidns"},
		{name: "userns auto", spec: core.PodSpec{UserNS: core.Namespace{NSMode: "auto"}}},
		{name: "userns auto size", spec: core.PodSpec{UserNS: core.Namespace{NSMode: "auto", Value: "size=2048"}}},
		{name: "userns auto bad option", spec: core.PodSpec{UserNS: core.Namespace{NSMode: "auto", Value: "uidmapping=0:1:1"}}, field: "userns"},
		{name: "userns auto without infra", spec: core.PodSpec{NoInfra: true, UserNS: core.Namespace{NSMode: "auto"}}, field: "userns"},
		{name: "userns keep-id", spec: core.PodSpec{UserNS: core.Namespace{NSMode: "keep-id"}}, field: "userns"},
		{name: "userns private without maps", spec: core.PodSpec{UserNS: core.Namespace{NSMode: "private"}}, field: "idmappings"},
		{name: "empty cpu limits", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{}}`)}},
		{name: "cpu limits", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"cpu":{"quota":1000}}`)}},
		{name: "block io limits", spec: core.PodSpec{ResourceLimits: mustResources(t, `{"blockIO":{"weight":300}}`)}, field: "resource_limits.blockIO"},
		{name: "no infra with share", spec: core.PodSpec{NoInfra: true, SharedNamespaces: []string{"net"}}, field: "shared_namespaces"},
		{name: "no infra", spec: core.PodSpec{NoInfra: true, ShareParent: &yes}},
		{name: "uid maps", spec: core.PodSpec{UserNS: core.Namespace{NSMode: "private"}, IDMappings: &core.IDMappingOptions{UIDMap: []core.IDMap{{Size: 10}}, GIDMap: []core.IDMap{{Size: 10}}}}},
		{name: "uid maps with host", spec: core.PodSpec{UserNS: core.Namespace{NSMode: "host"}, IDMappings: &core.IDMappingOptions{UIDMap: []core.IDMap{{Size: 10}}}}, field: "idmappings"},
		{name: "host id maps", spec: core.PodSpec{IDMappings: &core.IDMappingOptions{HostUIDMapping: true, HostGIDMapping: true}}},
		{name: "sysctl", spec: core.PodSpec{Sysctl: map[string]string{"net.core.somaxconn": "1024"}}},
		{name: "sysctl without infra", spec: core.PodSpec{NoInfra: true, Sysctl: map[string]string{"net.core.somaxconn": "1024"}}, field: "sysctl"},
		{name: "member mounts", spec: core.PodSpec{Mounts: []specs.Mount{{Destination: "/d", Type: "tmpfs", Source: "tmpfs"}}}},
		{name: "relative member mount", spec: core.PodSpec{Mounts: []specs.Mount{{Destination: "d", Type: "tmpfs", Source: "tmpfs"}}}, field: "mounts[0].destination"},
		{name: "relative member volume", spec: core.PodSpec{Volumes: []core.NamedVolume{{Name: "v", Dest: "d"}}}, field: "volumes[0].Dest"},
		{name: "infra conmon pid file", spec: core.PodSpec{InfraConmonPidFile: "/x"}, field: "infra_conmon_pid_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.spec
			err := normalize(&s)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.check != nil {
					c.check(t, s)
				}
				return
			}
			var fe *core.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want a 400 naming %s", err, c.field)
			}
		})
	}
}

func mustResources(t *testing.T, raw string) *specs.LinuxResources {
	var r specs.LinuxResources
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}
