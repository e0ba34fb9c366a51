package containers

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// listFilters are the keys the container listing accepts.
var listFilters = []string{"id", "name", "label", "label!", "pod", "status", "exited", "ancestor", "before", "since", "until",
	"health", "volume", "network", "publish", "expose"}

// containerStates are the values of the status filter.
var containerStates = []string{"created", "running", "paused", "exited", "stopped", "configured", "removing", "stopping", "unknown", "restarting", "dead"}

// compileFilters turns list or prune filters into one test with the list
// filters' rules (listfilter); only the keys in allowed are accepted.
func (m *Manager) compileFilters(filters map[string][]string, allowed ...string) (listfilter.Test[*record], error) {
	labels := listfilter.Labels(func(r *record) map[string]string { return r.Spec.Labels })
	all := map[string]listfilter.Rule[*record]{
		"id":     listfilter.Pattern(func(r *record) string { return r.ID }),
		"name":   listfilter.Pattern(func(r *record) string { return r.Name }),
		"label":  labels,
		"label!": labels,
		"until":  listfilter.CreatedBefore(func(r *record) time.Time { return r.Created }),
		"pod": listfilter.Func(func(_ string, vals []string) (func(*record) bool, error) {
			pods := m.podResolver()
			return func(r *record) bool {
				return r.Pod != "" && slices.ContainsFunc(vals, func(v string) bool {
					return strings.HasPrefix(r.Pod, v) || (pods != nil && pods.PodName(r.Pod) == v)
				})
			}, nil
		}),
		"status": listfilter.Func(func(key string, vals []string) (func(*record) bool, error) {
			if err := listfilter.OneOf(key, vals, containerStates...); err != nil {
				return nil, err
			}
			return func(r *record) bool {
				return slices.Contains(vals, r.State.String()) || slices.Contains(vals, string(r.State))
			}, nil
		}),
		"exited": listfilter.Func(func(key string, vals []string) (func(*record) bool, error) {
			codes, err := listfilter.Ints(key, vals, math.MinInt32)
			if err != nil {
				return nil, err
			}
			return func(r *record) bool {
				return (r.State == core.StateExited || r.State == core.StateStopped) && slices.Contains(codes, int(r.ExitCode))
			}, nil
		}),
		"ancestor": listfilter.Func(func(_ string, vals []string) (func(*record) bool, error) {
			return func(r *record) bool {
				return slices.ContainsFunc(vals, func(v string) bool { return ancestorMatches(r, v) })
			}, nil
		}),
		"before": m.createdRelative,
		"since":  m.createdRelative,
		"health": listfilter.Func(func(key string, vals []string) (func(*record) bool, error) {
			if err := listfilter.OneOf(key, vals, "starting", "healthy", "unhealthy", "none"); err != nil {
				return nil, err
			}
			return func(r *record) bool {
				return slices.Contains(vals, cmp.Or(healthStatus(r), "none"))
			}, nil
		}),
		// volume: a named volume the container mounts, or the destination
		// of any of its mounts, as Docker matches it.
		"volume": listfilter.Func(func(_ string, vals []string) (func(*record) bool, error) {
			return func(r *record) bool {
				return slices.ContainsFunc(vals, func(v string) bool {
					return slices.ContainsFunc(r.Volumes, func(mv mountedVolume) bool { return mv.Name == v || mv.Dest == v }) ||
						slices.ContainsFunc(r.Spec.Mounts, func(mt specs.Mount) bool { return mt.Destination == v })
				})
			}, nil
		}),
		"network": m.networkRule,
		"publish": portRule(func(r *record) []portProto { return publishedPorts(r) }),
		"expose":  portRule(requestExposedPorts),
	}
	return listfilter.Compile("container", filters, listfilter.Only(all, allowed...))
}

// createdRelative is the rule of before and since: created before (after)
// one of the containers named.
func (m *Manager) createdRelative(key string, vals []string) (listfilter.Test[*record], error) {
	refs := make([]time.Time, 0, len(vals))
	for _, v := range vals {
		e, err := m.lookup(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", key, v, err)
		}
		refs = append(refs, m.snapshot(e).Created)
	}
	before := key == "before"
	return listfilter.Pure(func(r *record) bool {
		return slices.ContainsFunc(refs, func(t time.Time) bool {
			return before && r.Created.Before(t) || !before && r.Created.After(t)
		})
	}), nil
}

// networkRule matches containers on one of the networks named (by name or
// ID); an unknown network matches nothing, as with Docker.
func (m *Manager) networkRule(_ string, vals []string) (listfilter.Test[*record], error) {
	names := map[string]bool{}
	for _, v := range vals {
		names[v] = true
		if m.nets != nil {
			if n, err := m.nets.Lookup(context.Background(), v); err == nil {
				names[n.Name] = true
			}
		}
	}
	return listfilter.Pure(func(r *record) bool {
		for name := range r.Spec.Networks {
			if names[name] {
				return true
			}
		}
		return false
	}), nil
}

// portProto is a container port and its protocol.
type portProto struct {
	port  uint16
	proto string
}

// publishedPorts are the container ports the container publishes.
func publishedPorts(r *record) []portProto {
	var out []portProto
	for _, p := range r.Spec.PortMappings {
		for i := uint16(0); i < max(p.Range, 1); i++ {
			out = append(out, portProto{p.ContainerPort + i, cmp.Or(p.Protocol, "tcp")})
		}
	}
	return out
}

// requestExposedPorts are the ports the container exposes: those the request
// names and those it publishes.
func requestExposedPorts(r *record) []portProto {
	out := publishedPorts(r)
	for port, protos := range r.Spec.Expose {
		for _, proto := range strings.Split(cmp.Or(protos, "tcp"), ",") {
			out = append(out, portProto{port, proto})
		}
	}
	return out
}

// portRule matches containers with a port in one of the values: a port or
// a range ("8000-8080"), with an optional protocol ("/udp"; tcp when none
// is named), as Docker's publish and expose filters read them.
func portRule(ports func(*record) []portProto) listfilter.Rule[*record] {
	return listfilter.Func(func(key string, vals []string) (func(*record) bool, error) {
		type want struct {
			lo, hi uint16
			proto  string
		}
		var wants []want
		for _, v := range vals {
			spec, proto, _ := strings.Cut(v, "/")
			proto = cmp.Or(proto, "tcp")
			if proto != "tcp" && proto != "udp" && proto != "sctp" {
				return nil, fmt.Errorf("%s=%s: %q is not tcp, udp or sctp", key, v, proto)
			}
			loS, hiS, isRange := strings.Cut(spec, "-")
			lo, err1 := strconv.ParseUint(loS, 10, 16)
			hi := lo
			var err2 error
			if isRange {
				hi, err2 = strconv.ParseUint(hiS, 10, 16)
			}
			if err1 != nil || err2 != nil || lo == 0 || hi < lo {
				return nil, fmt.Errorf("%s=%s: not a port or a port range", key, v)
			}
			wants = append(wants, want{uint16(lo), uint16(hi), proto})
		}
		return func(r *record) bool {
			return slices.ContainsFunc(ports(r), func(p portProto) bool {
				return slices.ContainsFunc(wants, func(w want) bool { return p.proto == w.proto && p.port >= w.lo && p.port <= w.hi })
			})
		}, nil
	})
}
