package quadletactivate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"sync"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// Activation statuses kept in the state database.
const (
	statusActivating = "activating"
	statusActive     = "active"
	statusRemoving   = "removing"
)

// Kinds of recorded objects.
const (
	objImage     = "image"
	objNetwork   = "network"
	objVolume    = "volume"
	objPod       = "pod"
	objContainer = "container"
	// objKube is a played YAML (the object is the YAML itself), taken down
	// with kube down; objKubeForce with kube down --force.
	objKube      = "kube"
	objKubeForce = "kube-force"
	// objKubePod is a pod a play made: its status, the kube down removes it.
	objKubePod = "kube-pod"
)

// UnitStore is the quadlet directory (package quadlets' Store).
type UnitStore interface {
	InstallChecked(ctx context.Context, archive io.Reader, opts core.QuadletInstallOptions, check func(unitPath string, data []byte) error) (core.QuadletInstallReport, error)
	ListStatus(filters map[string][]string, status func(name string) string) ([]core.QuadletListEntry, error)
	Exists(ctx context.Context, name string) error
	Print(ctx context.Context, name string) (string, error)
	Remove(ctx context.Context, names []string, opts core.QuadletRemoveOptions) (core.QuadletRemoveReport, error)
	UnitFile(name string) (string, error)
}

// Records keeps activation records (the state database).
type Records interface {
	BeginQuadletActivation(ctx context.Context, r state.QuadletActivation) error
	ReleaseQuadletDependencies(ctx context.Context, owner string) error
	AddQuadletObject(ctx context.Context, name string, obj state.QuadletObject) error
	SetQuadletStatus(ctx context.Context, name, status string) error
	RemoveQuadletActivation(ctx context.Context, name string) error
	QuadletActivations(ctx context.Context) ([]state.QuadletActivation, error)
}

// Options are the Manager's dependencies: the unit store, the records,
// and the engine's domains it creates objects through.
type Options struct {
	Store      UnitStore
	Records    Records
	Containers core.Containers
	Pods       core.Pods
	Networks   core.Networks
	Volumes    core.Volumes
	Images     core.Images
	Transfer   core.ImageTransfer
	Builder    core.Builder
	// Kube plays .kube units' YAML; nil refuses their activation.
	Kube core.KubePlayer
	// Systemd hands generated services to systemd where it runs.
	Systemd Systemd
	// ActivateOnInstall is the default of an install's Activate.
	ActivateOnInstall bool
	Logger            *slog.Logger
}

// Manager is core.Quadlets with activation: it keeps units in the store
// and turns the activated ones into engine objects.
type Manager struct {
	o  Options
	mu sync.Mutex
}

// Open finishes what an engine killed during an activation or a removal
// left: an activation cut short is torn down with the dependencies it
// activated (and its unit removed when it came with the unit's install),
// a removal cut short is completed.
func Open(ctx context.Context, o Options) (*Manager, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{o: o}
	recs, err := o.Records.QuadletActivations(ctx)
	if err != nil {
		return nil, fmt.Errorf("quadlet activations: %w", err)
	}
	interrupted := map[string]bool{}
	for _, rec := range recs {
		if rec.Status == statusActivating && rec.ActivatedBy == "" {
			interrupted[rec.Name] = true
		}
	}
	for _, rec := range teardownOrder(recs) {
		_, unitErr := o.Store.UnitFile(rec.Name)
		if rec.Status == statusActive && unitErr == nil && !interrupted[rec.ActivatedBy] {
			continue
		}
		o.Logger.Warn("finishing an interrupted quadlet activation or removal", "quadlet", rec.Name, "status", rec.Status)
		if err := m.teardown(ctx, rec); err != nil {
			return nil, err
		}
		if (rec.Status == statusRemoving || rec.OwnsUnit) && unitErr == nil {
			if _, err := o.Store.Remove(ctx, []string{rec.Name}, core.QuadletRemoveOptions{Ignore: true}); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// records answers the activation records by quadlet name.
func (m *Manager) records(ctx context.Context) (map[string]state.QuadletActivation, error) {
	recs, err := m.o.Records.QuadletActivations(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]state.QuadletActivation, len(recs))
	for _, r := range recs {
		out[r.Name] = r
	}
	return out, nil
}

// Install installs a quadlet and, with activation, turns it into its
// objects. A unit activation refuses is not installed; a failed activation
// removes what it made and the unit. Replacing an active quadlet tears
// its activation down first.
func (m *Manager) Install(ctx context.Context, archive io.Reader, opts core.QuadletInstallOptions) (core.QuadletInstallReport, error) {
	activate := m.o.ActivateOnInstall
	if opts.Activate != nil {
		activate = *opts.Activate
	}
	if opts.ReloadSystemd {
		if err := m.o.Systemd.check(); err != nil {
			return core.QuadletInstallReport{}, core.InvalidArgument("reloadSystemd", err)
		}
		if opts.Activate != nil && *opts.Activate {
			return core.QuadletInstallReport{}, core.InvalidArgument("activate", errors.New("a unit handed to systemd (reloadSystemd) is run by systemd, not activated by the engine"))
		}
		activate = false
	}
	var name, oldService string
	check := func(unitPath string, data []byte) error {
		name = path.Base(unitPath)
		if file, err := m.o.Store.UnitFile(name); err == nil && opts.ReloadSystemd && opts.Replace && exists(file) {
			// The replaced unit's service, whose name may change with
			// ServiceName=.
			oldService = m.serviceName(name)
		}
		if activate {
			return Check(name, data)
		}
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	report, err := m.o.Store.InstallChecked(ctx, archive, core.QuadletInstallOptions{Replace: opts.Replace, MultipartBoundary: opts.MultipartBoundary}, check)
	if err != nil {
		return report, err
	}
	ctx = context.WithoutCancel(ctx)
	recs, err := m.records(ctx)
	if err != nil {
		return report, err
	}
	if old, ok := recs[name]; ok {
		if err := m.teardown(ctx, old); err != nil {
			return report, fmt.Errorf("%s: tearing down the replaced quadlet's objects: %w", name, err)
		}
		delete(recs, name)
	}
	dropUnit := func() {
		if _, err := m.o.Store.Remove(ctx, []string{name}, core.QuadletRemoveOptions{Ignore: true}); err != nil {
			m.o.Logger.Error("removing a refused unit", "quadlet", name, "error", err)
		}
	}
	if opts.ReloadSystemd {
		services, err := m.generate(name)
		if err == nil {
			var stale []string
			if _, kept := services[oldService]; oldService != "" && !kept {
				stale = append(stale, oldService)
			}
			err = m.o.Systemd.apply(services, stale)
		}
		if err != nil {
			dropUnit()
			return core.QuadletInstallReport{}, fmt.Errorf("%s: the unit was not installed: %w", name, err)
		}
	}
	if activate {
		r := &run{m: m, ctx: ctx, owner: name, recs: recs, visiting: map[string]bool{}}
		err := r.activate(ctx, name, true)
		if err == nil {
			err = m.o.Records.ReleaseQuadletDependencies(ctx, name)
		}
		if err != nil {
			r.rollback()
			dropUnit()
			return core.QuadletInstallReport{}, fmt.Errorf("%s: activation failed, the unit was not installed: %w", name, err)
		}
	}
	return report, nil
}

// List answers the installed quadlets with the status of the activated
// ones, in systemd's words as Podman reports them (ACTIVE/SUB).
func (m *Manager) List(ctx context.Context, filters map[string][]string) ([]core.QuadletListEntry, error) {
	recs, err := m.records(ctx)
	if err != nil {
		return nil, err
	}
	return m.o.Store.ListStatus(filters, func(name string) string {
		rec, ok := recs[name]
		if !ok {
			return ""
		}
		return m.status(ctx, rec)
	})
}

// status describes an activation record's objects as a systemd unit's
// ACTIVE/SUB state: a running container or pod is active/running, an
// object made once (network, volume, image) active/exited, a stopped
// container inactive/dead or failed/failed by its exit code.
func (m *Manager) status(ctx context.Context, rec state.QuadletActivation) string {
	switch rec.Status {
	case statusActivating:
		return "activating/start"
	case statusRemoving:
		return "deactivating/stop"
	}
	u, err := readUnit(m.o.Store, rec.Name)
	if err != nil {
		return "inactive/dead"
	}
	name := objectName(u)
	switch u.kind {
	case "Container":
		c, err := m.o.Containers.Lookup(ctx, name)
		switch {
		case err != nil:
			return "inactive/dead"
		case c.State == core.StateRunning || c.State == core.StatePaused:
			return "active/running"
		case c.State == core.StateConfigured || c.State == core.StateCreated:
			return "activating/start"
		case c.ExitCode != 0:
			return "failed/failed"
		}
		return "inactive/dead"
	case "Pod":
		p, err := m.o.Pods.Inspect(ctx, name)
		if err != nil || (p.State != "Running" && p.State != "Degraded") {
			return "inactive/dead"
		}
		return "active/running"
	case "Kube":
		for _, o := range rec.Objects {
			if o.Kind == objKubePod {
				if p, err := m.o.Pods.Inspect(ctx, o.Object); err == nil && (p.State == "Running" || p.State == "Degraded") {
					return "active/running"
				}
			}
		}
		return "inactive/dead"
	case "Network":
		_, err = m.o.Networks.Inspect(ctx, name)
	case "Volume":
		_, err = m.o.Volumes.Inspect(ctx, name)
	default:
		_, err = m.o.Images.Lookup(ctx, name)
	}
	if err != nil {
		return "inactive/dead"
	}
	return "active/exited"
}

// Exists answers nil when quadlet name is installed.
func (m *Manager) Exists(ctx context.Context, name string) error { return m.o.Store.Exists(ctx, name) }

// Print answers quadlet name's unit file.
func (m *Manager) Print(ctx context.Context, name string) (string, error) {
	return m.o.Store.Print(ctx, name)
}

// Remove removes quadlets. An active one needs Force (else an
// ErrInvalidArgument naming force, as Podman answers 400 for a running
// unit), which tears
// down what its activation created before its files go.
func (m *Manager) Remove(ctx context.Context, names []string, opts core.QuadletRemoveOptions) (core.QuadletRemoveReport, error) {
	if opts.ReloadSystemd {
		if err := m.o.Systemd.check(); err != nil {
			return core.QuadletRemoveReport{}, core.InvalidArgument("reloadSystemd", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	if opts.All {
		list, err := m.o.Store.ListStatus(nil, nil)
		if err != nil {
			return core.QuadletRemoveReport{}, err
		}
		names = nil
		for _, q := range list {
			names = append(names, q.Name)
		}
	}
	recs, err := m.records(ctx)
	if err != nil {
		return core.QuadletRemoveReport{}, err
	}
	report := core.QuadletRemoveReport{Removed: []string{}, Errors: map[string]string{}, Causes: map[string]error{}}
	fail := func(name string, err error) {
		report.Errors[name] = err.Error()
		report.Causes[name] = err
	}
	for _, name := range names {
		if rec, ok := recs[name]; ok {
			if !opts.Force {
				// Podman answers 400 with these words.
				fail(name, core.InvalidArgument("force", fmt.Errorf("quadlet %s is running and force is not set, refusing to remove", name)))
				continue
			}
			if err := m.o.Records.SetQuadletStatus(ctx, name, statusRemoving); err != nil {
				fail(name, err)
				continue
			}
			if err := m.teardown(ctx, rec); err != nil {
				fail(name, err)
				continue
			}
		}
		service, pod := "", ""
		if opts.ReloadSystemd {
			service, pod = m.serviceName(name), m.podOf(name)
		}
		one, err := m.o.Store.Remove(ctx, []string{name}, core.QuadletRemoveOptions{Ignore: opts.Ignore})
		if err != nil {
			return report, err
		}
		report.Removed = append(report.Removed, one.Removed...)
		for n, msg := range one.Errors {
			report.Errors[n] = msg
			report.Causes[n] = one.Causes[n]
		}
		if service != "" && len(one.Removed) > 0 {
			if err := m.unhand(service, pod); err != nil {
				fail(name, err)
			}
		}
	}
	return report, nil
}

// generate answers the services to hand to systemd for installed quadlet
// name: its own and, for a pod member whose pod's service systemd has,
// the pod's again (its Wants=/Before= list its members).
func (m *Manager) generate(name string) (map[string]string, error) {
	service, err := GenerateService(m.o.Store, name, m.o.Systemd.EngineURL)
	if err != nil {
		return nil, err
	}
	out := map[string]string{m.serviceName(name): service}
	if pod := m.podOf(name); pod != "" && m.o.Systemd.has(m.serviceName(pod)) {
		podService, err := GenerateService(m.o.Store, pod, m.o.Systemd.EngineURL)
		if err != nil {
			return nil, fmt.Errorf("%s: regenerating the service of its pod: %w", name, err)
		}
		out[m.serviceName(pod)] = podService
	}
	return out, nil
}

// unhand removes service from systemd and regenerates the service of pod
// (the removed unit's pod, "" for none) when systemd has it.
func (m *Manager) unhand(service, pod string) error {
	write := map[string]string{}
	if pod != "" && m.o.Systemd.has(m.serviceName(pod)) {
		podService, err := GenerateService(m.o.Store, pod, m.o.Systemd.EngineURL)
		if err != nil {
			return fmt.Errorf("regenerating the service of %s: %w", pod, err)
		}
		write[m.serviceName(pod)] = podService
	}
	return m.o.Systemd.apply(write, []string{service})
}

// podOf is the .pod an installed .container names in Pod= ("" for none).
func (m *Manager) podOf(name string) string {
	if path.Ext(name) != ".container" {
		return ""
	}
	u, err := readUnit(m.o.Store, name)
	if err != nil {
		return ""
	}
	return u.value("Pod")
}

// serviceName is the service installed quadlet name is generated as.
func (m *Manager) serviceName(name string) string {
	file, err := m.o.Store.UnitFile(name)
	if err != nil {
		return quadlets.ServiceName(name, "")
	}
	return ServiceUnitName(file)
}

// teardown removes a record's objects, newest first, then the record.
// Objects already gone are fine; an image still in use stays.
func (m *Manager) teardown(ctx context.Context, rec state.QuadletActivation) error {
	objs := slices.Clone(rec.Objects)
	slices.Reverse(objs)
	for _, o := range objs {
		var err error
		switch o.Kind {
		case objContainer:
			err = m.o.Containers.Remove(ctx, o.Object, core.RemoveContainerOptions{Force: true, Volumes: true, Ignore: true})
			if errors.Is(err, core.ErrNoSuchContainer) {
				err = nil
			}
		case objPod:
			_, err = m.o.Pods.Remove(ctx, o.Object, core.RemovePodOptions{Force: true})
			if errors.Is(err, core.ErrNoSuchPod) {
				err = nil
			}
		case objVolume:
			err = m.o.Volumes.Remove(ctx, o.Object, true)
			if errors.Is(err, core.ErrNoSuchVolume) {
				err = nil
			}
		case objNetwork:
			err = m.o.Networks.Remove(ctx, o.Object, true, nil)
			if errors.Is(err, core.ErrNoSuchNetwork) {
				err = nil
			}
		case objKube, objKubeForce:
			_, err = m.o.Kube.Down(ctx, []byte(o.Object), core.KubeDownOptions{Force: o.Kind == objKubeForce})
			if errors.Is(err, core.ErrNoSuchPod) {
				err = nil
			}
		case objKubePod:
			// the kube down of the play recorded before it removes the pod
		case objImage:
			if _, errs := m.o.Images.Remove(ctx, []string{o.Object}, core.ImageRemoveOptions{Ignore: true}); len(errs) > 0 {
				m.o.Logger.Info("an image a quadlet pulled stays", "quadlet", rec.Name, "image", o.Object, "reason", errors.Join(errs...))
			}
		}
		if err != nil {
			return fmt.Errorf("quadlet %s: removing %s %s: %w", rec.Name, o.Kind, objectLabel(o), err)
		}
	}
	return m.o.Records.RemoveQuadletActivation(ctx, rec.Name)
}

// teardownOrder orders records for teardown: newest first, and users
// before what they use (containers and kube plays, then pods, then
// volumes and networks, then images).
func teardownOrder(recs []state.QuadletActivation) []state.QuadletActivation {
	out := slices.Clone(recs)
	slices.Reverse(out)
	rank := map[string]int{".container": 0, ".kube": 0, ".pod": 1, ".volume": 2, ".network": 2, ".image": 3, ".build": 3}
	slices.SortStableFunc(out, func(a, b state.QuadletActivation) int {
		return rank[path.Ext(a.Name)] - rank[path.Ext(b.Name)]
	})
	return out
}

// objectLabel names a recorded object in messages (a played YAML by its size).
func objectLabel(o state.QuadletObject) string {
	if o.Kind == objKube || o.Kind == objKubeForce {
		return fmt.Sprintf("(%d bytes of YAML)", len(o.Object))
	}
	return o.Object
}

// exists reports whether path names a file.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
