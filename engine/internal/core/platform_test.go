package core

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func imageFor(os, arch, variant string) *Image {
	img := &Image{}
	img.Config.Platform = ocispec.Platform{OS: os, Architecture: arch, Variant: variant}
	return img
}

func TestCheckImagePlatform(t *testing.T) {
	for _, c := range []struct {
		img               *Image
		os, arch, variant string
		match             bool
	}{
		{imageFor("linux", "s390x", ""), "", "", "", true}, // nothing asked: any image
		{imageFor("linux", runtime.GOARCH, ""), "linux", "", "", true},
		{imageFor("linux", "amd64", ""), "", "x86_64", "", true},
		{imageFor("linux", "arm64", "v8"), "linux", "arm64", "", true},
		{imageFor("linux", "aarch64", ""), "", "arm64", "v8", true},
		{imageFor("linux", "arm", "v7"), "", "arm", "", true},
		{imageFor("linux", "arm", "v6"), "", "arm", "v7", false},
		{imageFor("linux", "amd64", ""), "", "arm64", "", false},
		{imageFor("linux", "386", ""), "", "amd64", "", false}, // strict: no fallback to 386
		{imageFor("windows", "amd64", ""), "linux", "amd64", "", false},
	} {
		err := CheckImagePlatform("img", c.img, c.os, c.arch, c.variant)
		if (err == nil) != c.match {
			t.Errorf("image %+v, asked %q/%q/%q: %v, want match %v", c.img.Config.Platform, c.os, c.arch, c.variant, err, c.match)
		}
		if err != nil && (!errors.Is(err, ErrNoSuchImage) || !errors.Is(err, ErrPlatformMismatch) || !strings.HasPrefix(err.Error(), "img: no image for ")) {
			t.Errorf("mismatch error %q is not both sentinels, or does not name the image", err)
		}
	}
}

func TestParsePlatform(t *testing.T) {
	os, arch, variant, err := ParsePlatform("platform", "linux/arm/v7")
	if err != nil || os != "linux" || arch != "arm" || variant != "v7" {
		t.Errorf("linux/arm/v7: %q %q %q %v", os, arch, variant, err)
	}
	for _, bad := range []string{"a/b/c/d", "linux/", "/"} {
		_, _, _, err := ParsePlatform("platform", bad)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "platform") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
