// Package systemdgen writes systemd service units that run a container, or
// a pod and its members, through the engine: the units call podman as a
// remote client of the engine's own listening address (podman generate
// systemd). The units' shape follows Podman 4.3.1's; the text is Berth's.
package systemdgen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// podmanPath is the client the units run.
const podmanPath = "/usr/bin/podman"

// restartPolicies are systemd's Restart= values.
var restartPolicies = map[string]bool{
	"no": true, "on-success": true, "on-failure": true, "on-abnormal": true,
	"on-watchdog": true, "on-abort": true, "always": true,
}

// Generator makes the units from the engine's containers and pods.
type Generator struct {
	containers core.Containers
	pods       core.Pods
	engineURL  string
}

// New returns a generator whose units reach the engine at listen (the
// engine's --listen address; a wildcard host becomes loopback). pods may
// be nil (then only containers have units).
func New(containers core.Containers, pods core.Pods, listen string) *Generator {
	return &Generator{containers: containers, pods: pods, engineURL: clientURL(listen)}
}

func clientURL(listen string) string {
	u, err := url.Parse(listen)
	if err != nil || u.Scheme != "tcp" {
		return listen
	}
	switch host := u.Hostname(); host {
	case "", "0.0.0.0", "::":
		u.Host = "127.0.0.1:" + u.Port()
	}
	return u.String()
}

// GenerateSystemd answers the units for nameOrID: one for a container; for
// a pod, one for the pod (its infra container) and one per member.
func (g *Generator) GenerateSystemd(ctx context.Context, nameOrID string, opts core.SystemdOptions) (map[string]string, error) {
	if opts.RestartPolicy == "" {
		opts.RestartPolicy = "on-failure"
	}
	if !restartPolicies[opts.RestartPolicy] {
		return nil, core.InvalidArgument("restartPolicy", fmt.Errorf("%q is not a systemd restart policy (no, on-success, on-failure, on-abnormal, on-watchdog, on-abort, always)", opts.RestartPolicy))
	}
	if opts.New && (opts.RestartPolicy == "always" || opts.RestartPolicy == "on-success") {
		return nil, core.InvalidArgument("restartPolicy", fmt.Errorf("%s cannot be used with new: those units are Type=oneshot, which systemd does not restart %s", opts.RestartPolicy, opts.RestartPolicy))
	}
	for _, env := range opts.AdditionalEnv {
		if k, _, ok := strings.Cut(env, "="); !ok || k == "" || strings.ContainsAny(env, "\n") {
			return nil, core.InvalidArgument("additionalEnvVariables", fmt.Errorf("%q is not KEY=VALUE", env))
		}
	}
	for field, deps := range map[string][]string{"wants": opts.Wants, "after": opts.After, "requires": opts.Requires} {
		for _, d := range deps {
			if d == "" || strings.ContainsAny(d, " \t\n") {
				return nil, core.InvalidArgument(field, fmt.Errorf("%q is not a unit name", d))
			}
		}
	}
	ctr, err := g.containers.Inspect(ctx, nameOrID, false)
	if err == nil {
		if ctr.Pod != "" {
			// Podman makes a member's unit bound to its pod's only when
			// the whole pod is generated.
			ctr.Pod = ""
		}
		name, text, err := g.containerUnit(ctr, opts, "")
		if err != nil {
			return nil, err
		}
		return map[string]string{name: text}, nil
	}
	if !errors.Is(err, core.ErrNoSuchContainer) || g.pods == nil {
		return nil, err
	}
	pod, podErr := g.pods.Inspect(ctx, nameOrID)
	if errors.Is(podErr, core.ErrNoSuchPod) {
		return nil, fmt.Errorf("%s does not refer to a container or pod: %w", nameOrID, core.ErrNoSuchContainer)
	}
	if podErr != nil {
		return nil, podErr
	}
	return g.podUnits(ctx, pod, opts)
}

// unitName is PREFIX SEPARATOR (name or ID).
func unitName(prefix, sep, name, id string, useName bool) string {
	if useName {
		return prefix + sep + name
	}
	return prefix + sep + id
}

func (g *Generator) podman(args ...string) string {
	return quoteCommand(append([]string{podmanPath, "--url", g.engineURL}, args...))
}

// containerUnit writes the unit of one container; podUnit names the unit
// of the pod it belongs to when the pod's units are generated together.
func (g *Generator) containerUnit(ctr *core.InspectContainerData, opts core.SystemdOptions, podUnit string) (string, string, error) {
	name := unitName(opts.ContainerPrefix, opts.Separator, ctr.Name, ctr.ID, opts.UseName)
	s := newUnit(name, "container "+ctr.Name, opts)
	if podUnit != "" {
		s.line("BindsTo", podUnit+".service")
		s.line("After", podUnit+".service")
	}
	s.userDeps(opts)
	s.serviceStart(opts)
	if opts.New {
		args, err := runArgs(ctr)
		if err != nil {
			return "", "", err
		}
		stop := fmt.Sprint(opts.StopTimeout)
		s.line("ExecStartPre", "/bin/rm -f %t/%n.ctr-id")
		s.line("ExecStart", g.podman(append([]string{"run", "--cidfile=%t/%n.ctr-id", "--rm", "-d", "--replace"}, args...)...))
		s.line("ExecStop", g.podman("stop", "--ignore", "-t", stop, "--cidfile=%t/%n.ctr-id"))
		s.line("ExecStopPost", g.podman("rm", "-f", "--ignore", "-t", stop, "--cidfile=%t/%n.ctr-id"))
		s.line("Type", "oneshot")
		s.line("RemainAfterExit", "yes")
	} else {
		g.existingService(s, ctr, opts)
	}
	s.install()
	return name, s.String(), nil
}

// podUnits writes the pod's unit (it runs the infra container) and its
// members' units, which are bound to it.
func (g *Generator) podUnits(ctx context.Context, pod *core.InspectPodData, opts core.SystemdOptions) (map[string]string, error) {
	if opts.New {
		return nil, core.InvalidArgument("new", errors.New("units that create the pod (new) are not supported yet; generate the pod's units without it"))
	}
	if pod.InfraContainerID == "" {
		return nil, core.InvalidArgument("name", fmt.Errorf("pod %s has no infra container: its units need one", pod.Name))
	}
	infra, err := g.containers.Inspect(ctx, pod.InfraContainerID, false)
	if err != nil {
		return nil, fmt.Errorf("pod %s: infra container: %w", pod.Name, err)
	}
	podName := unitName(opts.PodPrefix, opts.Separator, pod.Name, pod.ID, opts.UseName)
	units := map[string]string{}
	var members []string
	for _, m := range pod.Containers {
		if m.ID == pod.InfraContainerID {
			continue
		}
		ctr, err := g.containers.Inspect(ctx, m.ID, false)
		if err != nil {
			return nil, fmt.Errorf("pod %s: member %s: %w", pod.Name, m.Name, err)
		}
		name, text, err := g.containerUnit(ctr, opts, podName)
		if err != nil {
			return nil, err
		}
		units[name] = text
		members = append(members, name+".service")
	}
	s := newUnit(podName, "pod "+pod.Name, opts)
	if len(members) > 0 {
		s.line("Requires", strings.Join(members, " "))
		s.line("Before", strings.Join(members, " "))
	}
	s.userDeps(opts)
	s.serviceStart(opts)
	g.existingService(s, infra, opts)
	s.install()
	units[podName] = s.String()
	return units, nil
}

// newUnit starts the unit text of name: the generated-by header and the
// [Unit] section describing what.
func newUnit(name, what string, opts core.SystemdOptions) *unitWriter {
	s := &unitWriter{}
	s.header(name, what, opts)
	s.unitSection(name)
	return s
}

// existingService writes the service lines of a unit that starts and stops
// an existing container (by name with UseName, else by ID); conmon's PID
// file tells systemd the main process. A pod's unit runs its infra
// container so.
func (g *Generator) existingService(s *unitWriter, ctr *core.InspectContainerData, opts core.SystemdOptions) {
	ref := ctr.ID
	if opts.UseName {
		ref = ctr.Name
	}
	stop := fmt.Sprint(opts.StopTimeout)
	s.line("ExecStart", g.podman("start", ref))
	s.line("ExecStop", g.podman("stop", "-t", stop, ref))
	s.line("ExecStopPost", g.podman("stop", "-t", stop, ref))
	s.line("PIDFile", ctr.ConmonPidFile)
	s.line("Type", "forking")
}

// runArgs turns a container's create command (podman [global flags]
// create|run [flags] IMAGE [CMD]) into the arguments of a podman run that
// makes the same container: global flags go (the unit names the engine),
// so do the flags the unit sets itself.
func runArgs(ctr *core.InspectContainerData) ([]string, error) {
	var cmd []string
	if ctr.Config != nil {
		cmd = ctr.Config.CreateCommand
	}
	sub := -1
	for i, a := range cmd {
		if a == "create" || a == "run" {
			sub = i
			break
		}
	}
	if sub < 0 {
		return nil, core.InvalidArgument("new", fmt.Errorf("container %s has no podman create or run command to repeat (it was not created by a podman client)", ctr.Name))
	}
	var args []string
	named := false
	rest := cmd[sub+1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "-d", a == "--detach", a == "--detach=true", a == "--rm", a == "--rm=true", a == "--replace", a == "--replace=true":
			continue
		case a == "--cidfile":
			i++
			continue
		case strings.HasPrefix(a, "--cidfile="):
			continue
		case a == "--name" || strings.HasPrefix(a, "--name="):
			named = true
		}
		args = append(args, a)
	}
	if !named {
		args = append([]string{"--name", ctr.Name}, args...)
	}
	return args, nil
}

// quoteCommand writes argv as a systemd command line: arguments with
// spaces, quotes or backslashes are double-quoted, and % and $ are escaped
// so systemd passes them through.
func quoteCommand(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		escaped := strings.NewReplacer("%", "%%", "$", "$$").Replace(a)
		// The unit's own specifiers (%t, %n) stay specifiers.
		escaped = strings.ReplaceAll(escaped, "%%t/%%n", "%t/%n")
		if a == "" || strings.ContainsAny(a, " \t\"'\\;") {
			escaped = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(escaped) + `"`
		}
		out[i] = escaped
	}
	return strings.Join(out, " ")
}

// unitWriter builds a unit file's text.
type unitWriter struct {
	b strings.Builder
}

func (w *unitWriter) String() string { return w.b.String() }

func (w *unitWriter) line(key, value string) {
	fmt.Fprintf(&w.b, "%s=%s\n", key, value)
}

func (w *unitWriter) header(name, what string, opts core.SystemdOptions) {
	if opts.NoHeader {
		return
	}
	fmt.Fprintf(&w.b, "# %s.service\n# autogenerated by berth-engine for %s\n\n", name, what)
}

func (w *unitWriter) unitSection(name string) {
	w.b.WriteString("[Unit]\n")
	w.line("Description", "Berth "+name+".service")
	w.line("Documentation", "man:podman-generate-systemd(1)")
	w.line("Wants", "network-online.target")
	w.line("After", "network-online.target")
}

func (w *unitWriter) userDeps(opts core.SystemdOptions) {
	if len(opts.Wants)+len(opts.After)+len(opts.Requires) == 0 {
		return
	}
	w.b.WriteString("\n# User-defined dependencies\n")
	if len(opts.Wants) > 0 {
		w.line("Wants", strings.Join(opts.Wants, " "))
	}
	if len(opts.After) > 0 {
		w.line("After", strings.Join(opts.After, " "))
	}
	if len(opts.Requires) > 0 {
		w.line("Requires", strings.Join(opts.Requires, " "))
	}
}

func (w *unitWriter) serviceStart(opts core.SystemdOptions) {
	w.b.WriteString("\n[Service]\n")
	w.line("Environment", "PODMAN_SYSTEMD_UNIT=%n")
	for _, env := range opts.AdditionalEnv {
		w.line("Environment", quoteCommand([]string{env}))
	}
	w.line("Restart", opts.RestartPolicy)
	if opts.RestartSec > 0 {
		w.line("RestartSec", fmt.Sprint(opts.RestartSec))
	}
	if opts.StartTimeout > 0 {
		w.line("TimeoutStartSec", fmt.Sprint(opts.StartTimeout))
	}
	w.line("TimeoutStopSec", fmt.Sprint(opts.StopTimeout+60))
}

func (w *unitWriter) install() {
	w.b.WriteString("\n[Install]\nWantedBy=default.target\n")
}
