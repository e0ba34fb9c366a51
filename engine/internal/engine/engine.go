// Package engine assembles berth-engine: it opens the backends, connects them
// and builds the HTTP handler. It is the one place that knows every backend.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/deploy/kube"
	"github.com/berth-project/berth/engine/internal/backend/deploy/kubeapply"
	"github.com/berth-project/berth/engine/internal/backend/deploy/kubegen"
	"github.com/berth-project/berth/engine/internal/backend/deploy/systemdgen"
	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/backend/images/artifactstore"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/pods"
	"github.com/berth-project/berth/engine/internal/backend/platform/apparmor"
	"github.com/berth-project/berth/engine/internal/backend/system"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/dockerapi"
	"github.com/berth-project/berth/engine/internal/handlers"
	"github.com/berth-project/berth/shared/server"
)

// Config is the engine's configuration (the command line's flags).
type Config struct {
	// Listen is the address served on (reported by info).
	Listen string
	// Root holds persistent state, RunRoot runtime state.
	Root, RunRoot string
	// Runtime is the OCI runtime (runc or crun).
	Runtime string
	// CRIU is the CRIU binary runc checkpoints and restores with ("": runc
	// looks for criu in PATH).
	CRIU string
	// StorageDriver is overlay or vfs; "" tries overlay, then vfs.
	StorageDriver string
	// RegistriesConf is the registries.conf to use ("" = ROOT/registries.conf).
	RegistriesConf string
	// SwaggerSpec is the OpenAPI document to serve.
	SwaggerSpec string
	// MaxExpandedSize bounds what a client's archive, build context or
	// upload may expand to on disk, in bytes (0 = sizelimit.DefaultMax).
	MaxExpandedSize int64
	// Network configures the default network, the subnet pool and bridge
	// names of new networks (zero values: Podman's defaults).
	Network NetworkConfig
	// ActivateQuadlets activates quadlets at install unless the request
	// says otherwise (activate=false).
	ActivateQuadlets bool
	// CDISpecDirs are directories of CDI specs read after the default ones
	// (/etc/cdi, /var/run/cdi), so a device they define wins.
	CDISpecDirs []string
	// ExecRetention is how long ended exec sessions stay inspectable
	// (0: Podman's five minutes).
	ExecRetention time.Duration
	// Metrics records request and engine metrics; nil creates one.
	Metrics *server.Metrics
	// CgroupManager is systemd or cgroupfs; "" picks as Podman does:
	// systemd where systemd runs as PID 1 on cgroup v2, else cgroupfs.
	CgroupManager string
}

// Engine is a running engine: its backends and its HTTP handler.
type Engine struct {
	logger     *slog.Logger
	images     *imagestore.Store
	containers *containerBackend
	streams    *streamServices
	pods       *pods.Manager
	handler    http.Handler
}

// New opens the engine's state under cfg.Root and cfg.RunRoot, repairs what a
// crash left inconsistent, and builds the HTTP handler.
func New(ctx context.Context, logger *slog.Logger, cfg Config) (*Engine, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CgroupManager == "" {
		cfg.CgroupManager = cgroups.DefaultManager()
	}
	if err := cgroups.CheckManager(cfg.CgroupManager); err != nil {
		return nil, fmt.Errorf("engine: --cgroup-manager: %w", err)
	}
	for _, dir := range []string{cfg.Root, cfg.RunRoot} {
		if dir == "" {
			return nil, errors.New("engine: root and runroot are required")
		}
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	// The default seccomp profile is compiled in; the file is written at
	// every start so that info names one holding exactly what is applied.
	if err := seccomp.WriteDefault(seccompDefaultPath(cfg)); err != nil {
		return nil, fmt.Errorf("engine: seccomp profile: %w", err)
	}
	// AppArmor is chosen once: where the host enforces it, containers run
	// under the engine's default profile, which must load.
	appArmor, err := apparmor.Detect(ctx, filepath.Join(cfg.RunRoot, "apparmor"))
	if err != nil {
		return nil, fmt.Errorf("engine: AppArmor: %w", err)
	}
	images, err := imagestore.Open(imagestore.Options{
		Root:           cfg.Root,
		RunRoot:        cfg.RunRoot,
		Driver:         cfg.StorageDriver,
		RegistriesConf: cfg.RegistriesConf,
		Logger:         logger,
	})
	if err != nil {
		return nil, err
	}
	e := &Engine{logger: logger, images: images}
	if err := e.repairStore(ctx); err != nil {
		e.Close()
		return nil, err
	}
	transfer, err := imagestore.NewTransfer(images, imagestore.TransferOptions{Logger: logger, MaxExpandedSize: cfg.MaxExpandedSize})
	if err != nil {
		e.Close()
		return nil, err
	}

	artifacts, err := artifactstore.Open(artifactstore.Options{
		Dir:         filepath.Join(cfg.Root, "artifacts"),
		MaxFileSize: cfg.MaxExpandedSize,
		Registry:    transfer,
		Logger:      logger,
	})
	if err != nil {
		e.Close()
		return nil, err
	}

	ctrs, err := openContainers(ctx, logger, cfg, images, transfer, appArmor, artifacts)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.containers = ctrs
	if e.streams, err = openStreams(ctx, logger, ctrs.db, ctrs.manager, cfg.ExecRetention); err != nil {
		e.Close()
		return nil, err
	}
	ctrs.volumes.SetEventSink(e.streams.events.VolumeEvent)
	images.SetEventSink(e.streams.events)
	ctrs.secrets.SetEventSink(e.streams.events)
	if e.pods, err = openPods(ctx, logger, cfg, ctrs, images, transfer, e.streams); err != nil {
		e.Close()
		return nil, err
	}
	builder, err := openBuilder(logger, cfg, images, transfer, ctrs, appArmor)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: builder: %w", err)
	}
	ctrs.networks.SetEventSink(e.streams.events.NetworkEvent)

	kubePlayer := kube.New(kube.Options{
		Pods:            e.pods,
		Containers:      ctrs.manager,
		Images:          images,
		Transfer:        transfer,
		Volumes:         ctrs.volumes,
		Secrets:         ctrs.secrets,
		Networks:        ctrs.networks,
		Builder:         builder,
		TempDir:         cfg.RunRoot,
		MaxExpandedSize: cfg.MaxExpandedSize,
		InfraImage:      e.pods.InfraImage,
		CDI:             ctrs.cdi,
		Logger:          logger,
	})
	e.streams.unsubscribe = append(e.streams.unsubscribe, ctrs.manager.Subscribe(kubePlayer.ServiceHook))

	quadletManager, err := openQuadlets(ctx, logger, cfg, ctrs, e.pods, images, transfer, builder, kubePlayer)
	if err != nil {
		e.Close()
		return nil, err
	}

	sys := system.New(images, system.Config{
		Listen:             cfg.Listen,
		SeccompProfilePath: seccompDefaultPath(cfg),
		AppArmorEnabled:    appArmor.Enabled,
		LogDrivers:         runtime.LogDrivers(),
		Runtime:            cfg.Runtime,
		CgroupManager:      cfg.CgroupManager,
		VolumePath:         filepath.Join(cfg.Root, "volumes"),
		Containers:         ctrs.manager,
		CountContainers:    ctrs.manager.Count,
		Volumes:            ctrs.volumes,
		VolumeUsers:        ctrs.manager,
		State:              ctrs.db,
		CDI:                ctrs.cdi,
		Pruners: core.Pruners{
			Pods:       e.pods.PruneForSystem,
			Containers: ctrs.manager.Prune,
			Images:     images.Prune,
			Volumes:    ctrs.volumes.Prune,
			Networks:   ctrs.networks.Prune,
		},
	})
	metrics := cfg.Metrics
	if metrics == nil {
		metrics = server.NewMetrics("berth_engine")
	}
	if err := registerImageMetrics(metrics.Registry(), images); err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: image metrics: %w", err)
	}
	if err := transfer.RegisterMetrics(metrics.Registry()); err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: transfer metrics: %w", err)
	}
	if err := ctrs.manager.RegisterMetrics(metrics.Registry()); err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: container metrics: %w", err)
	}
	if err := e.streams.events.RegisterMetrics(metrics.Registry()); err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: event metrics: %w", err)
	}
	kubeGen := kubegen.New(ctrs.manager, e.pods, ctrs.volumes)
	docker := dockerapi.NewHandler(logger, dockerapi.Deps{
		System:      sys,
		Containers:  ctrs.manager,
		Images:      images,
		Transfer:    transfer,
		Networks:    ctrs.networks,
		Volumes:     ctrs.volumes,
		Build:       builder,
		ContainerIO: e.streams.io,
		Exec:        e.streams.exec,
		Events:      e.streams.events,
	}, dockerapi.Config{DefaultNetwork: cfg.Network.DefaultNetwork})
	e.handler = handlers.NewServer(logger, handlers.Deps{
		System:      sys,
		Images:      images,
		Transfer:    transfer,
		Manifests:   imagestore.NewManifestLists(transfer),
		Artifacts:   artifacts,
		Containers:  ctrs.manager,
		Volumes:     ctrs.volumes,
		Secrets:     ctrs.secrets,
		Pods:        e.pods,
		Networks:    ctrs.networks,
		ContainerIO: e.streams.io,
		Exec:        e.streams.exec,
		Events:      e.streams.events,
		Health:      e.streams.health,
		Build:       builder,
		Quadlets:    quadletManager,
		Kube:        kubePlayer,
		Systemd:     systemdgen.New(ctrs.manager, e.pods, cfg.Listen),

		KubeGenerator: kubeGen,
		KubeApplier:   kubeapply.New(kubeGen),

		Ready: map[string]server.Check{
			"storage": func(context.Context) error {
				_, err := images.Storage().GraphDriver()
				return err
			},
		},
	}, handlers.Config{
		SwaggerSpec: cfg.SwaggerSpec,
		Metrics:     metrics,
		Started:     time.Now(),
		Docker:      docker,
	})
	return e, nil
}

// repairStore runs the store's metadata checks and removes what an earlier
// crash (kill -9 mid-pull or mid-load) left damaged, so the image list is
// consistent before the first request.
func (e *Engine) repairStore(ctx context.Context) error {
	report, err := e.images.RepairOnStart(ctx)
	if err != nil {
		return fmt.Errorf("engine: store check: %w", err)
	}
	if report.Errors {
		e.logger.Warn("store check found damage and repaired it",
			"removed_images", len(report.RemovedImages), "removed_layers", len(report.RemovedLayers))
	}
	return nil
}

// Handler is the engine's HTTP handler.
func (e *Engine) Handler() http.Handler { return e.handler }

// Images is the image store.
func (e *Engine) Images() *imagestore.Store { return e.images }

// StorageDriver names the storage driver in use.
func (e *Engine) StorageDriver() string { return e.images.Storage().GraphDriverName() }

// Close releases the backends.
func (e *Engine) Close() error {
	if e.pods != nil {
		e.pods.Close()
	}
	if e.streams != nil {
		e.streams.Close()
	}
	if e.containers != nil {
		e.containers.Close()
	}
	return e.images.Shutdown()
}

// seccompDefaultPath is the file of the engine's default seccomp profile.
func seccompDefaultPath(cfg Config) string {
	return filepath.Join(cfg.RunRoot, "seccomp", "default.json")
}
