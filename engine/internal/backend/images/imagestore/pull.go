package imagestore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/pkg/shortnames"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"

	"github.com/berth-project/berth/engine/internal/core"
)

// RegistryReference checks that ref names a registry image — no transport, or
// the docker:// one — and returns it without the transport. Any other
// transport (docker-archive:, oci:, dir:, containers-storage: ...) and any
// malformed name is an ErrInvalidArgument about field.
func RegistryReference(field, ref string) (string, error) {
	if ref == "" {
		return "", core.InvalidArgument(field, errors.New("must not be empty"))
	}
	if rest, ok := strings.CutPrefix(ref, "docker://"); ok {
		ref = rest
	} else if transport, _, found := strings.Cut(ref, ":"); found && isTransportName(transport) {
		return "", core.InvalidArgument(field, fmt.Errorf("%q: only registry references are supported, not the %s transport", ref, transport))
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return "", core.InvalidArgument(field, fmt.Errorf("%q: %w", ref, err))
	}
	return ref, nil
}

// isTransportName reports whether name is a containers/image transport other
// than docker (also those this build leaves out). A registry host never
// collides: "host:port/..." has a port after the colon, and transport names
// are not valid ports.
func isTransportName(name string) bool {
	switch name {
	case "docker-archive", "docker-daemon", "oci", "oci-archive", "dir", "containers-storage",
		"tarball", "sif", "ostree", "docker":
		return true
	}
	return false
}

// Pull copies an image from a registry into the store, trying again as
// opts.TransferRetries says.
func (t *Transfer) Pull(ctx context.Context, opts core.PullOptions) (ids []string, err error) {
	defer t.observe("pull", time.Now(), &err)
	defer func() {
		if err == nil {
			for _, id := range ids {
				t.store.emit(ctx, "pull", id, opts.Reference)
			}
		}
	}()
	err = retrying(ctx, opts.TransferRetries, opts.Progress, "Pulling "+opts.Reference, func() error {
		var err error
		ids, err = t.pull(ctx, opts)
		return err
	})
	return ids, err
}

// pull is one try of Pull.
func (t *Transfer) pull(ctx context.Context, opts core.PullOptions) ([]string, error) {
	name, err := RegistryReference("reference", opts.Reference)
	if err != nil {
		return nil, err
	}
	policy := opts.Policy
	if policy == "" {
		policy = core.PullAlways
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}

	if policy != core.PullAlways && !opts.AllTags {
		local, err := t.store.Lookup(ctx, name)
		if err == nil && (opts.OS != "" || opts.Arch != "" || opts.Variant != "") {
			// A local image for another platform is not the one asked for.
			err = core.CheckImagePlatform(name, local, opts.OS, opts.Arch, opts.Variant)
		}
		switch {
		case err == nil && policy != core.PullNewer:
			return []string{local.ID}, nil
		case err != nil && !errors.Is(err, core.ErrNoSuchImage):
			return nil, err
		case err != nil && policy == core.PullNever:
			if errors.Is(err, core.ErrPlatformMismatch) {
				return nil, fmt.Errorf("%w (pull policy is never)", err)
			}
			return nil, fmt.Errorf("%s: %w (pull policy is never)", name, core.ErrNoSuchImage)
		}
		if err == nil {
			// policy newer: skip the pull when the registry still has the local manifest.
			if same, err := t.remoteMatches(ctx, name, local, opts); err == nil && same {
				return []string{local.ID}, nil
			}
		}
	}

	sys, cleanup, err := t.registryContext(opts.Auth, opts.TLSVerify)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	sys.OSChoice, sys.ArchitectureChoice, sys.VariantChoice = opts.OS, opts.Arch, opts.Variant

	candidates, err := t.pullCandidates(sys, name)
	if err != nil {
		return nil, err
	}
	if opts.AllTags {
		return t.pullAllTags(ctx, sys, candidates, progress, opts.Blobs)
	}
	var pullErrs []error
	for _, candidate := range candidates {
		id, err := t.pullOne(ctx, sys, candidate, announce(progress, "Trying to pull "+candidate.String()+"...\n"), opts.Blobs)
		if err == nil {
			return []string{id}, nil
		}
		pullErrs = append(pullErrs, err)
		if ctx.Err() != nil || !errors.Is(err, core.ErrNoSuchImage) {
			break
		}
	}
	return nil, errors.Join(pullErrs...)
}

// pullCandidates returns the fully qualified references name stands for:
// itself when it names a registry, else the short-name resolution of the
// engine's registries configuration.
func (t *Transfer) pullCandidates(sys *types.SystemContext, name string) ([]reference.Named, error) {
	if !shortnames.IsShortName(name) {
		named, err := reference.ParseNormalizedNamed(name)
		if err != nil {
			return nil, core.InvalidArgument("reference", err)
		}
		return []reference.Named{reference.TagNameOnly(named)}, nil
	}
	resolved, err := shortnames.Resolve(sys, name)
	if err != nil {
		return nil, core.InvalidArgument("reference", err)
	}
	out := make([]reference.Named, 0, len(resolved.PullCandidates))
	for _, c := range resolved.PullCandidates {
		out = append(out, c.Value)
	}
	if len(out) == 0 {
		return nil, core.InvalidArgument("reference", fmt.Errorf("%q resolves to no registry", name))
	}
	return out, nil
}

// pullAllTags pulls every tag of the candidates' repository.
func (t *Transfer) pullAllTags(ctx context.Context, sys *types.SystemContext, candidates []reference.Named, progress io.Writer, blobs func(core.BlobProgress)) ([]string, error) {
	var pullErrs []error
	for _, candidate := range candidates {
		if _, tagged := candidate.(reference.Tagged); tagged && candidate.String() != reference.TagNameOnly(reference.TrimNamed(candidate)).String() {
			return nil, core.InvalidArgument("reference", fmt.Errorf("%q: a tag cannot be combined with allTags", candidate.String()))
		}
		repo := reference.TrimNamed(candidate)
		repoRef, err := docker.NewReference(reference.TagNameOnly(repo))
		if err != nil {
			return nil, core.InvalidArgument("reference", err)
		}
		tags, err := docker.GetRepositoryTags(ctx, sys, repoRef)
		if err != nil {
			pullErrs = append(pullErrs, classifyRegistryError(fmt.Errorf("listing tags of %s: %w", repo.String(), err)))
			continue
		}
		var ids []string
		for _, tag := range tags {
			named, err := reference.WithTag(repo, tag)
			if err != nil {
				continue
			}
			id, err := t.pullOne(ctx, sys, named, announce(progress, "Trying to pull "+named.String()+"...\n"), blobs)
			if err != nil {
				return ids, err
			}
			ids = append(ids, id)
		}
		return ids, nil
	}
	return nil, errors.Join(pullErrs...)
}

// pullOne copies one fully qualified reference into the store and returns
// the stored image's ID.
func (t *Transfer) pullOne(ctx context.Context, sys *types.SystemContext, named reference.Named, progress io.Writer, blobs func(core.BlobProgress)) (id string, err error) {
	src, err := docker.NewReference(named)
	if err != nil {
		return "", core.InvalidArgument("reference", err)
	}
	dest, err := istorage.Transport.NewStoreReference(t.store.Storage(), named, "")
	if err != nil {
		return "", core.InvalidArgument("reference", err)
	}
	end := t.begin()
	defer func() { end(err != nil) }()
	var resolved types.ImageReference
	opts := &copy.Options{
		ReportWriter:            progress,
		SourceCtx:               sys,
		ReportResolvedReference: &resolved,
	}
	if blobs != nil {
		stop := reportBlobs(opts, blobs)
		defer stop()
	}
	_, err = t.copyImage(ctx, dest, src, opts)
	if err != nil {
		return "", classifyRegistryError(fmt.Errorf("pulling %s: %w", named.String(), err))
	}
	return storedImageID(resolved, dest)
}

// storedImageID returns the ID of the image a copy into storage created.
func storedImageID(resolved, dest types.ImageReference) (string, error) {
	ref := resolved
	if ref == nil {
		ref = dest
	}
	_, img, err := istorage.ResolveReference(ref)
	if err != nil {
		return "", fmt.Errorf("finding the stored image: %w", err)
	}
	return img.ID, nil
}

// remoteMatches reports whether the registry's manifest for name is the one
// the local image was pulled with.
func (t *Transfer) remoteMatches(ctx context.Context, name string, local *core.Image, opts core.PullOptions) (bool, error) {
	sys, cleanup, err := t.registryContext(opts.Auth, opts.TLSVerify)
	if err != nil {
		return false, err
	}
	defer cleanup()
	candidates, err := t.pullCandidates(sys, name)
	if err != nil {
		return false, err
	}
	ref, err := docker.NewReference(candidates[0])
	if err != nil {
		return false, err
	}
	remote, err := docker.GetDigest(ctx, sys, ref)
	if err != nil {
		return false, err
	}
	if local.Digest == remote.String() {
		return true, nil
	}
	for _, d := range local.RepoDigests {
		if strings.HasSuffix(d, "@"+remote.String()) {
			return true, nil
		}
	}
	return false, nil
}

// classifyRegistryError maps registry answers to domain errors: an unknown
// repository or manifest is ErrNoSuchImage, its text and root cause the
// registry's own words ("manifest unknown", as Podman reports them); a TLS
// failure (a plain-HTTP registry, an unknown authority, a wrong host
// name) is ErrInvalidArgument about tlsVerify, the client's choice to
// make; the rest keeps its text, which already names the registry and what
// failed (connection refused, credentials).
func classifyRegistryError(err error) error {
	var coder errcode.ErrorCoder
	if errors.As(err, &coder) {
		switch coder.ErrorCode() {
		case v2.ErrorCodeManifestUnknown, v2.ErrorCodeNameUnknown:
			words := coder.ErrorCode().Message()
			var registryErr errcode.Error
			if errors.As(err, &registryErr) && registryErr.Message != "" {
				words = registryErr.Message
			}
			return registryNotFound{words: errors.New(words), err: err}
		}
	}
	var unauthorized docker.ErrUnauthorizedForCredentials
	if errors.As(err, &unauthorized) {
		return err
	}
	if tlsFailure(err) {
		return core.InvalidArgument("tlsVerify", fmt.Errorf("the registry's TLS could not be verified (for a plain-HTTP or self-signed registry pass tlsVerify=false, or mark it insecure in registries.conf): %w", err))
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return fmt.Errorf("registry did not answer in time: %w", err)
	}
	return err
}

// registryNotFound is a registry's "manifest unknown" or "name unknown":
// ErrNoSuchImage (404) whose text is the whole error and whose root cause
// (the first error it wraps, what the API answers as cause) is the
// registry's own message.
type registryNotFound struct {
	words error
	err   error
}

func (e registryNotFound) Error() string   { return e.err.Error() }
func (e registryNotFound) Unwrap() []error { return []error{e.words, e.err} }

// Is makes errors.Is(err, core.ErrNoSuchImage) true.
func (e registryNotFound) Is(target error) bool { return target == core.ErrNoSuchImage }

// tlsFailure reports whether err is a TLS failure against a registry: it
// answered HTTPS with plain HTTP, or its certificate did not verify.
func tlsFailure(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
	)
	return errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &verify) || errors.As(err, &authority) ||
		errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &record)
}

// announce returns a writer that writes line before the first progress
// text: a pull that fails before copying anything reports only its error,
// which the API can then send with a proper status.
func announce(w io.Writer, line string) io.Writer {
	return &announcingWriter{w: w, line: line}
}

type announcingWriter struct {
	mu   sync.Mutex
	w    io.Writer
	line string
}

func (a *announcingWriter) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.line != "" {
		if _, err := io.WriteString(a.w, a.line); err != nil {
			return 0, err
		}
		a.line = ""
	}
	return a.w.Write(p)
}

// blobProgressInterval is how often a blob being read reports progress.
const blobProgressInterval = 200 * time.Millisecond

// reportBlobs makes copy options deliver each blob's progress to report;
// stop (called once the copy returned) waits for the last report.
func reportBlobs(opts *copy.Options, report func(core.BlobProgress)) (stop func()) {
	events := make(chan types.ProgressProperties, 16)
	opts.Progress = events
	opts.ProgressInterval = blobProgressInterval
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range events {
			bp := core.BlobProgress{Digest: p.Artifact.Digest.String(), Current: int64(p.Offset), Total: p.Artifact.Size}
			switch p.Event {
			case types.ProgressEventNewArtifact:
				bp.Event = core.BlobStarted
			case types.ProgressEventRead:
				bp.Event = core.BlobRead
			case types.ProgressEventDone:
				bp.Event = core.BlobDone
			case types.ProgressEventSkipped:
				bp.Event = core.BlobSkipped
			default:
				continue
			}
			report(bp)
		}
	}()
	return func() {
		close(events)
		<-done
	}
}
