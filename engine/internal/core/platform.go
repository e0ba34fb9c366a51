package core

import (
	"errors"
	"fmt"

	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ErrPlatformMismatch marks an image found by name whose platform is not
// the one a request asked for (a *PlatformMismatchError).
var ErrPlatformMismatch = errors.New("image for another platform")

// PlatformMismatchError is an image found by name for another platform
// than the one asked for. It is ErrNoSuchImage too: the image asked for is
// not stored (Docker's CLI pulls on the 404, and a pull with policy missing
// fetches the right one).
type PlatformMismatchError struct {
	Name       string
	Want, Have ocispec.Platform
}

func (e *PlatformMismatchError) Error() string {
	return fmt.Sprintf("%s: no image for %s here (the local one is for %s)", e.Name, platforms.Format(e.Want), platforms.Format(e.Have))
}

// Is makes the error both ErrPlatformMismatch and ErrNoSuchImage.
func (e *PlatformMismatchError) Is(target error) bool {
	return target == ErrPlatformMismatch || target == ErrNoSuchImage
}

// CheckImagePlatform says whether img is for the platform that os, arch and
// variant name ("" for any). Architecture names are normalized as
// containerd's platforms package does (x86_64 is amd64, aarch64 arm64); an
// arm64 image without a variant is v8.
func CheckImagePlatform(name string, img *Image, os, arch, variant string) error {
	if os == "" && arch == "" && variant == "" {
		return nil
	}
	want := RequestedPlatform(os, arch, variant)
	have := platforms.Normalize(ocispec.Platform{OS: img.Config.OS, Architecture: img.Config.Architecture, Variant: img.Config.Variant})
	if platforms.OnlyStrict(want).Match(have) {
		return nil
	}
	return &PlatformMismatchError{Name: name, Want: want, Have: have}
}

// RequestedPlatform is the platform a request names, normalized; what it
// leaves out is this machine's (a variant alone applies to this machine's
// architecture).
func RequestedPlatform(os, arch, variant string) ocispec.Platform {
	p := platforms.DefaultSpec()
	if os != "" {
		p.OS = os
	}
	if arch != "" {
		p.Architecture, p.Variant = arch, variant
	} else if variant != "" {
		p.Variant = variant
	}
	return platforms.Normalize(p)
}

// ParsePlatform splits a platform string ("linux", "linux/arm64",
// "linux/arm/v7", Docker's form) into its parts; field names the request
// member in the 400 of a string that is not one.
func ParsePlatform(field, s string) (os, arch, variant string, err error) {
	p, err := platforms.Parse(s)
	if err != nil {
		return "", "", "", InvalidArgument(field, fmt.Errorf("%q is not a platform (os[/arch[/variant]])", s))
	}
	return p.OS, p.Architecture, p.Variant, nil
}
