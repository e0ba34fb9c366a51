package kube

import (
	"context"
	"errors"
	"fmt"
	units "github.com/docker/go-units"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/berth-project/berth/engine/internal/core"
)

// DefaultNetwork is the network kube pods join when the request names
// none, as Podman names it; it is created with DNS on first use.
const DefaultNetwork = "podman-default-kube-network"

// Options are the Player's dependencies.
type Options struct {
	Pods       core.Pods
	Containers core.Containers
	Images     core.Images
	Transfer   core.ImageTransfer
	Volumes    core.Volumes
	Secrets    core.Secrets
	Networks   core.Networks
	// Builder builds images from Containerfiles in a played archive; nil
	// refuses build.
	Builder core.Builder
	// TempDir is where archives are unpacked ("" = os.TempDir()).
	TempDir string
	// MaxExpandedSize bounds what an archive may expand to (bytes; 0 = 1 GiB).
	MaxExpandedSize int64
	// InfraImage answers the engine's infra image, which service
	// containers run; nil refuses serviceContainer.
	InfraImage func(ctx context.Context) (string, error)
	// CDI offers the devices that limits of a CDI kind
	// ("example.com/dev: 1") hand to containers; nil refuses such limits.
	CDI    core.CDIRegistry
	Logger *slog.Logger
}

// Player implements core.KubePlayer on the engine's core interfaces.
type Player struct {
	o Options
	// mu serializes plays and downs: a play checks names, then creates.
	mu sync.Mutex
}

var _ core.KubePlayer = (*Player)(nil)

// New returns a Player.
func New(o Options) *Player {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxExpandedSize <= 0 {
		o.MaxExpandedSize = 1 << 30
	}
	return &Player{o: o}
}

// PlayArchive unpacks the archive into a temporary directory and plays
// the YAML it holds with that directory as the context.
func (p *Player) PlayArchive(ctx context.Context, archive io.Reader, opts core.KubePlayOptions) (*core.KubePlayReport, error) {
	dir, err := os.MkdirTemp(p.o.TempDir, "berth-kube-")
	if err != nil {
		return nil, fmt.Errorf("kube play: %w", err)
	}
	defer os.RemoveAll(dir)
	data, err := unpack(archive, dir, p.o.MaxExpandedSize)
	if err != nil {
		return nil, err
	}
	opts.ContextDir = dir
	return p.Play(ctx, data, opts)
}

// Play creates what the YAML describes; see core.KubePlayer.
func (p *Player) Play(ctx context.Context, data []byte, opts core.KubePlayOptions) (*core.KubePlayReport, error) {
	if err := checkPlayOptions(&opts, p.o.Builder != nil); err != nil {
		return nil, err
	}
	docs, err := parseDocuments(data)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	plan, err := p.plan(ctx, docs, opts)
	if err == nil {
		err = p.checkService(opts, plan)
	}
	if err != nil {
		return nil, err
	}
	if opts.Replace {
		if _, err := p.down(ctx, docs, core.KubeDownOptions{}); err != nil {
			return nil, fmt.Errorf("kube play: replacing: %w", err)
		}
	}
	serviceID := ""
	if opts.ServiceContainer {
		if serviceID, err = p.startService(ctx, data, plan, opts); err != nil {
			return nil, err
		}
	}
	run := &playRun{p: p, plan: plan, opts: opts}
	report, err := run.create(ctx)
	if err != nil {
		if rbErr := run.rollback(context.WithoutCancel(ctx)); rbErr != nil {
			p.o.Logger.Warn("kube play: removing what a failed play created", "error", rbErr)
		}
		if serviceID != "" {
			p.removeService(context.WithoutCancel(ctx), serviceID)
		}
		return nil, err
	}
	report.ServiceContainerID = serviceID
	if opts.Wait && (opts.Start == nil || *opts.Start) {
		code, err := run.wait(ctx)
		report.ExitCode = &code
		if rbErr := run.rollback(context.WithoutCancel(ctx)); rbErr != nil && err == nil {
			err = rbErr
		}
		if serviceID != "" {
			p.removeService(context.WithoutCancel(ctx), serviceID)
		}
		if err != nil {
			return nil, err
		}
	}
	return report, nil
}

// checkPlayOptions refuses the options the engine cannot honour.
func checkPlayOptions(opts *core.KubePlayOptions, canBuild bool) error {
	if _, err := playLogConfig(opts); err != nil {
		return err
	}
	switch u := opts.Userns; {
	case u == "", u == "host", u == core.UserNSAuto, strings.HasPrefix(u, core.UserNSAuto+":size="):
	default:
		return core.InvalidArgument("userns", fmt.Errorf("%q: a pod runs in the host's user namespace or one of its own (auto[:size=N])", opts.Userns))
	}
	if opts.NoHosts {
		return core.InvalidArgument("noHosts", errors.New("the engine always writes /etc/hosts of pods"))
	}
	if opts.Build != nil && *opts.Build && !canBuild {
		return core.InvalidArgument("build", errors.New("no builder is configured"))
	}
	if opts.Wait && opts.Start != nil && !*opts.Start {
		return core.InvalidArgument("wait", errors.New("wait needs the pods started"))
	}
	for k := range opts.Annotations {
		if k == "" {
			return core.InvalidArgument("annotations", errors.New("an annotation needs a key"))
		}
	}
	return nil
}

// playLogConfig is the log configuration kube play's logDriver and
// logOptions (tag=, max-size=) give every container; nil for neither.
func playLogConfig(opts *core.KubePlayOptions) (*core.LogConfig, error) {
	switch opts.LogDriver {
	case "", core.LogDriverK8sFile, core.LogDriverJournald, core.LogDriverNone:
	default:
		return nil, core.InvalidArgument("logDriver", fmt.Errorf("%q is not supported (k8s-file, journald, none)", opts.LogDriver))
	}
	if opts.LogDriver == "" && len(opts.LogOptions) == 0 {
		return nil, nil
	}
	lc := &core.LogConfig{Driver: opts.LogDriver}
	for _, o := range opts.LogOptions {
		k, v, ok := strings.Cut(o, "=")
		switch {
		case !ok:
			return nil, core.InvalidArgument("logOptions", fmt.Errorf("%q is not KEY=VALUE", o))
		case k == "tag":
			lc.Tag = v
		case k == "max-size":
			n, err := units.RAMInBytes(v)
			if err != nil || n <= 0 {
				return nil, core.InvalidArgument("logOptions", fmt.Errorf("max-size %q is not a size", v))
			}
			lc.Size = n
		default:
			return nil, core.InvalidArgument("logOptions", fmt.Errorf("log option %q is not supported (tag, max-size)", k))
		}
	}
	// The combinations (a tag needs journald, a size k8s-file) are checked
	// with each container's spec.
	return lc, nil
}
