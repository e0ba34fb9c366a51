package imagestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/image"
	"github.com/containers/image/v5/manifest"
	"github.com/containers/image/v5/types"

	"github.com/berth-project/berth/engine/internal/core"
)

// Distribution reads the manifest ref names from its registry: its
// descriptor, and the platforms of a manifest list's entries or, for one
// image, its config's platform. Nothing is stored. A short name tries the
// registries.conf candidates in order, as a pull does.
func (t *Transfer) Distribution(ctx context.Context, ref string, opts core.DistributionOptions) (*core.Distribution, error) {
	name, err := RegistryReference("name", ref)
	if err != nil {
		return nil, err
	}
	sys, cleanup, err := t.registryContext(opts.Auth, opts.TLSVerify)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	candidates, err := t.pullCandidates(sys, name)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, c := range candidates {
		d, err := distributionOf(ctx, sys, c)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !errors.Is(err, core.ErrNoSuchImage) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// distributionOf reads one fully qualified reference's manifest.
func distributionOf(ctx context.Context, sys *types.SystemContext, named reference.Named) (*core.Distribution, error) {
	ref, err := docker.NewReference(named)
	if err != nil {
		return nil, core.InvalidArgument("name", err)
	}
	src, err := ref.NewImageSource(ctx, sys)
	if err != nil {
		return nil, classifyRegistryError(err)
	}
	defer src.Close()
	raw, mime, err := src.GetManifest(ctx, nil)
	if err != nil {
		return nil, classifyRegistryError(err)
	}
	dgst, err := manifest.Digest(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", named.String(), err)
	}
	out := &core.Distribution{MediaType: mime, Digest: dgst.String(), Size: int64(len(raw))}
	if manifest.MIMETypeIsMultiImage(mime) {
		list, err := manifest.ListFromBlob(raw, mime)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", named.String(), err)
		}
		for _, d := range list.Instances() {
			inst, err := list.Instance(d)
			if err != nil || inst.ReadOnly.Platform == nil {
				continue
			}
			p := inst.ReadOnly.Platform
			out.Platforms = append(out.Platforms, core.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant,
				OSVersion: p.OSVersion, OSFeatures: p.OSFeatures})
		}
		return out, nil
	}
	img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, nil))
	if err != nil {
		return nil, classifyRegistryError(err)
	}
	cfg, err := img.OCIConfig(ctx)
	if err != nil {
		return nil, classifyRegistryError(err)
	}
	out.Platforms = []core.Platform{{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant,
		OSVersion: cfg.OSVersion, OSFeatures: cfg.OSFeatures}}
	return out, nil
}
