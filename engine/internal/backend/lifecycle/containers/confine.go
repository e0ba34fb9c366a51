package containers

import (
	"encoding/json"
	"fmt"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/core"
)

// imageSeccompLabel is the image label holding a seccomp profile, applied
// with seccomp_policy "image" (Podman's).
const imageSeccompLabel = "io.containers.seccomp.profile"

// resolveSeccomp reads the container's own seccomp profile, if it has one:
// the file the request names, or with policy "image" the image's label.
// It is read once, at create, and kept with the container (nil: the
// engine's default profile or none, as the spec says).
func resolveSeccomp(s *core.ContainerSpec, img *core.Image, host oci.Host) (json.RawMessage, error) {
	if s.SeccompProfilePath == seccomp.Unconfined {
		return nil, nil
	}
	if oci.CustomSeccompProfile(s) {
		data, err := seccomp.LoadFile(s.SeccompProfilePath)
		if err != nil {
			return nil, core.InvalidArgument("seccomp_profile_path", err)
		}
		if !host.Seccomp {
			return nil, core.InvalidArgument("seccomp_profile_path", fmt.Errorf("%s: the kernel has no seccomp filters", s.SeccompProfilePath))
		}
		return data, nil
	}
	if s.SeccompPolicy == core.SeccompPolicyImage && img != nil {
		if label := img.Config.Config.Labels[imageSeccompLabel]; label != "" {
			if err := seccomp.Check([]byte(label)); err != nil {
				return nil, core.InvalidArgument("seccomp_policy", fmt.Errorf("the image's %s label: %w", imageSeccompLabel, err))
			}
			return json.RawMessage(label), nil
		}
	}
	return nil, nil
}

// securityOpts are the --security-opt values that describe the container's
// confinement, as Podman's inspect lists them in HostConfig.SecurityOpt.
func securityOpts(s *core.ContainerSpec) []string {
	opts := []string{}
	if s.NoNewPrivs {
		opts = append(opts, "no-new-privileges")
	}
	if s.SeccompProfilePath != "" && s.SeccompProfilePath != seccomp.PodmanDefaultPath {
		opts = append(opts, "seccomp="+s.SeccompProfilePath)
	}
	for _, p := range s.Mask {
		opts = append(opts, "mask="+p)
	}
	for _, p := range s.Unmask {
		opts = append(opts, "unmask="+p)
	}
	return opts
}

// seccompProfilePath is what inspect reports as the container's profile:
// "unconfined", the file it was created with, or the engine's default.
func (m *Manager) seccompProfilePath(rec *record) string {
	switch {
	case oci.SeccompUnconfined(&rec.Spec, m.host):
		return seccomp.Unconfined
	case oci.CustomSeccompProfile(&rec.Spec):
		return rec.Spec.SeccompProfilePath
	case rec.SeccompProfile != nil:
		return "image:" + imageSeccompLabel
	}
	return m.seccompDefault
}
