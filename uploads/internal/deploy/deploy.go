// Package deploy is the engine-backed Deployer of the processor: it deploys what an
// upload holds into berth-engine through engineclient. Image archives go to
// ImagesLoad, quadlet units (with the files they reference) to InstallQuadlets,
// activated, and Kubernetes YAML to KubePlay; every other file type is refused.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-project/berth/uploads/engineclient"
	"github.com/berth-project/berth/uploads/internal/processor"
)

// Engine is the part of the engine API the deployer uses; *engineclient.Client
// implements it.
type Engine interface {
	LoadImageFile(ctx context.Context, path string) ([]string, error)
	InstallQuadlets(ctx context.Context, open engineclient.Opener, opts engineclient.QuadletInstallOptions) (engineclient.QuadletReport, error)
	KubePlay(ctx context.Context, open engineclient.Opener, opts engineclient.KubePlayOptions) (engineclient.KubePlayReport, error)
	Ping(ctx context.Context) (engineclient.PingInfo, error)
}

// LoadedFunc is told the image names each archive loaded.
type LoadedFunc func(ctx context.Context, rel string, names []string)

// Deployer deploys the files of an upload into the engine.
type Deployer struct {
	engine   Engine
	logger   *slog.Logger
	onLoaded LoadedFunc
}

// New returns a Deployer that deploys into engine. It logs what each file
// deployed and returns the image names archives loaded to the processor, which
// records them; onLoaded, when not nil, is also told about them.
func New(engine Engine, logger *slog.Logger, onLoaded LoadedFunc) *Deployer {
	return &Deployer{engine: engine, logger: logger, onLoaded: onLoaded}
}

// IsImageArchive reports whether the file at rel is deployed as an image
// archive: *.tar, *.tar.gz and *.tgz, in any letter case.
func IsImageArchive(rel string) bool {
	name := strings.ToLower(path.Base(rel))
	for _, suffix := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
			return true
		}
	}
	return false
}

// IsKubeYAML reports whether the file at rel is deployed as Kubernetes YAML:
// *.yaml and *.yml, in any letter case.
func IsKubeYAML(rel string) bool {
	name := strings.ToLower(path.Base(rel))
	for _, suffix := range []string{".yaml", ".yml"} {
		if strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
			return true
		}
	}
	return false
}

// stage is the step of a deployment a file belongs to; files deploy stage by
// stage, in lexical path order within one.
func stage(rel string) int {
	switch {
	case IsImageArchive(rel):
		return 0
	case unitExtension(rel) != "":
		return 1 + slices.Index(unitExtensions, unitExtension(rel))
	case IsKubeYAML(rel):
		return 1 + len(unitExtensions)
	}
	return 2 + len(unitExtensions)
}

// Plan orders the files of the upload at dir: image archives first (what the
// rest runs), then quadlet units by type (.network, .volume, .image, .build,
// .pod, .container, .kube: what a unit refers to before the unit), then
// Kubernetes YAML, then everything else. It reads every unit to find the
// files it references: those are sent along with the unit and have no
// deployment of their own (a .kube unit's YAML is not also played).
func (d *Deployer) Plan(dir string, files []string) (processor.Plan, error) {
	sorted := slices.Clone(files)
	slices.Sort(sorted)
	has := func(rel string) bool { _, ok := slices.BinarySearch(sorted, rel); return ok }
	p := &plan{d: d, dir: dir, refs: map[string][]string{}, bundled: map[string]string{}}
	for _, rel := range sorted {
		if unitExtension(rel) == "" {
			continue
		}
		content, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			// Deploy reports it as this unit's error.
			continue
		}
		refs := unitReferences(rel, content, has, sorted)
		p.refs[rel] = refs
		for _, ref := range refs {
			if _, ok := p.bundled[ref]; !ok {
				p.bundled[ref] = rel
			}
		}
	}
	p.files = slices.Clone(sorted)
	slices.SortStableFunc(p.files, func(a, b string) int { return stage(a) - stage(b) })
	return p, nil
}

// plan is the deployment of one upload.
type plan struct {
	d     *Deployer
	dir   string
	files []string
	// refs maps each unit to the files it references, sent along with it.
	refs map[string][]string
	// bundled maps each referenced file to the first unit referencing it.
	bundled map[string]string
}

func (p *plan) Files() []string { return p.files }

// Deploy deploys the file at rel by its type.
//
// A file a unit references is processor.ErrBundled. A file of no deployable
// type is processor.ErrUnsupported, without contacting the engine. An
// unreachable engine wraps processor.ErrUnavailable, so the upload waits and
// this file is deployed again later. Anything the engine refuses (a corrupt
// archive, a bad unit, YAML it cannot play) is an error for this file alone,
// carrying the engine's message.
func (p *plan) Deploy(ctx context.Context, rel string) ([]string, error) {
	if unit, ok := p.bundled[rel]; ok {
		p.d.logger.DebugContext(ctx, "file sent with its unit", "file", rel, "unit", unit)
		return nil, processor.ErrBundled
	}
	abs := filepath.Join(p.dir, filepath.FromSlash(rel))
	switch {
	case IsImageArchive(rel):
		return p.d.loadArchive(ctx, rel, abs)
	case unitExtension(rel) != "":
		return nil, p.d.installUnit(ctx, p.dir, rel, p.refs[rel])
	case IsKubeYAML(rel):
		return nil, p.d.playKube(ctx, rel, abs)
	}
	return nil, processor.ErrUnsupported
}

// engineError turns the engine client's error for one file into the file's
// outcome: unavailability is retried later, a refusal keeps the engine's
// message.
func engineError(what, action string, err error) error {
	if errors.Is(err, engineclient.ErrUnavailable) {
		return fmt.Errorf("%w: %w", processor.ErrUnavailable, err)
	}
	var apiErr *engineclient.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = apiErr.Cause
		}
		return fmt.Errorf("%s refused by the engine (%d): %s", what, apiErr.Status, msg)
	}
	return fmt.Errorf("%s: %w", action, err)
}

func (d *Deployer) loadArchive(ctx context.Context, rel, abs string) ([]string, error) {
	names, err := d.engine.LoadImageFile(ctx, abs)
	if err != nil {
		return nil, engineError("image archive", "loading image archive", err)
	}
	d.logger.InfoContext(ctx, "image archive loaded", "file", rel, "images", names)
	if d.onLoaded != nil {
		d.onLoaded(ctx, rel, names)
	}
	return names, nil
}

// installUnit installs the unit at rel with the files it references, replacing
// a quadlet of the same name (an upload deploys its units afresh) and
// activating it.
func (d *Deployer) installUnit(ctx context.Context, dir, rel string, refs []string) error {
	// Read the unit first, so a file gone missing is this file's error and
	// not a failed request.
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
		return fmt.Errorf("reading quadlet unit: %w", err)
	}
	open := func() (io.ReadCloser, error) {
		r, w := io.Pipe()
		go func() { w.CloseWithError(writeQuadletTar(w, dir, rel, refs)) }()
		return r, nil
	}
	report, err := d.engine.InstallQuadlets(ctx, open, engineclient.QuadletInstallOptions{Replace: true, Activate: true})
	if err != nil {
		return engineError("quadlet unit", "installing quadlet unit", err)
	}
	if len(report.Errors) > 0 {
		var msgs []string
		for file, msg := range report.Errors {
			msgs = append(msgs, file+": "+msg)
		}
		slices.Sort(msgs)
		return fmt.Errorf("quadlet unit refused by the engine: %s", strings.Join(msgs, "; "))
	}
	d.logger.InfoContext(ctx, "quadlet unit installed and activated", "file", rel, "with", refs)
	return nil
}

// playKube plays the Kubernetes YAML at abs, replacing what an earlier play of
// the same YAML created.
func (d *Deployer) playKube(ctx context.Context, rel, abs string) error {
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("reading kube YAML: %w", err)
	}
	open := func() (io.ReadCloser, error) { return os.Open(abs) }
	report, err := d.engine.KubePlay(ctx, open, engineclient.KubePlayOptions{Replace: true})
	if err != nil {
		return engineError("kube YAML", "playing kube YAML", err)
	}
	var failed, pods []string
	for _, pod := range report.Pods {
		pods = append(pods, pod.ID)
		failed = append(failed, pod.ContainerErrors...)
	}
	if len(failed) > 0 {
		return fmt.Errorf("kube YAML played, but containers failed to start: %s", strings.Join(failed, "; "))
	}
	d.logger.InfoContext(ctx, "kube YAML played", "file", rel, "pods", pods)
	return nil
}

// readyTimeout bounds the readiness check, so a probe gets its answer in
// time even when connections to the engine hang.
const readyTimeout = 2 * time.Second

// Ready is the readiness check of the engine: it fails while the engine does
// not answer its ping.
func (d *Deployer) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	_, err := d.engine.Ping(ctx)
	return err
}
