package imagestore

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/manifest"
	istorage "github.com/containers/image/v5/storage"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// Push copies a local image to a registry, trying again as
// opts.TransferRetries says.
func (t *Transfer) Push(ctx context.Context, source string, opts core.PushOptions) (manifestDigest string, err error) {
	defer t.observe("push", time.Now(), &err)
	err = retrying(ctx, opts.TransferRetries, opts.Progress, "Pushing "+source, func() error {
		var err error
		manifestDigest, err = t.push(ctx, source, opts)
		return err
	})
	return manifestDigest, err
}

// push is one try of Push.
func (t *Transfer) push(ctx context.Context, source string, opts core.PushOptions) (manifestDigest string, err error) {
	local, err := t.store.Lookup(ctx, source)
	if err != nil {
		return "", err
	}
	destination := opts.Destination
	if destination == "" {
		destination = source
	}
	name, err := RegistryReference("destination", destination)
	if err != nil {
		return "", err
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return "", core.InvalidArgument("destination", err)
	}
	named = reference.TagNameOnly(named)
	if _, digested := named.(reference.Digested); digested {
		return "", core.InvalidArgument("destination", fmt.Errorf("%q: cannot push to a digest reference", name))
	}
	mimeType, err := manifestMIMEType(opts.Format)
	if err != nil {
		return "", err
	}
	destCtx, cleanup, err := t.pushContext(opts.Auth, opts.TLSVerify, opts.CompressionFormat)
	if err != nil {
		return "", err
	}
	defer cleanup()

	src, err := istorage.Transport.NewStoreReference(t.store.Storage(), nil, local.ID)
	if err != nil {
		return "", err
	}
	dest, err := docker.NewReference(named)
	if err != nil {
		return "", core.InvalidArgument("destination", err)
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	copyOpts := &copy.Options{
		ReportWriter:          progress,
		DestinationCtx:        destCtx,
		RemoveSignatures:      opts.RemoveSignatures,
		ForceManifestMIMEType: mimeType,
	}
	stop := func() {}
	if opts.Blobs != nil {
		stop = reportBlobs(copyOpts, opts.Blobs)
	}
	rawManifest, err := t.copyImage(ctx, dest, src, copyOpts)
	stop()
	if err != nil {
		return "", classifyRegistryError(fmt.Errorf("pushing %s to %s: %w", source, named.String(), err))
	}
	t.store.emit(ctx, "push", local.ID, named.String())
	pushed, err := manifest.Digest(rawManifest)
	if err != nil {
		return "", fmt.Errorf("digest of the pushed manifest: %w", err)
	}
	return pushed.String(), nil
}

// manifestMIMEType maps Podman's push and save format names to manifest
// types; "" keeps the image's own.
func manifestMIMEType(format string) (string, error) {
	switch format {
	case "":
		return "", nil
	case "oci":
		return imgspecv1.MediaTypeImageManifest, nil
	case "v2s2", "docker":
		return manifest.DockerV2Schema2MediaType, nil
	case "v2s1":
		return manifest.DockerV2Schema1SignedMediaType, nil
	}
	return "", core.InvalidArgument("format", fmt.Errorf("%q is not oci, v2s2 or v2s1", format))
}
