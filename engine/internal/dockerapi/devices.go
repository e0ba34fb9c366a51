package dockerapi

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	containertypes "github.com/docker/docker/api/types/container"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// gpuKind is the CDI kind `docker run --gpus` asks for, as Docker's
// daemon does with CDI: NVIDIA's CDI specs (nvidia-ctk cdi generate) name
// the GPUs nvidia.com/gpu=0, =1 ... and =all.
const gpuKind = "nvidia.com/gpu"

// gpuCapabilities are the capabilities a --gpus request may name: "gpu",
// and the driver capabilities of NVIDIA's runtime, which its CDI spec
// provides whole (Docker's CLI sends [["gpu"]]).
var gpuCapabilities = []string{"gpu", "nvidia", "compute", "utility", "graphics", "video", "display", "compat32"}

// deviceRequests maps Docker's device requests to CDI devices: the "cdi"
// driver's device IDs are CDI names (docker run --device vendor/class=x
// of Docker 25 and later); a GPU request (docker run --gpus) becomes
// nvidia.com/gpu devices — all for a count of -1, the IDs given, or for a
// count N the first N (=0 ... =N-1). Anything else is refused, naming it.
func deviceRequests(spec *core.ContainerSpec, reqs []containertypes.DeviceRequest) error {
	for i, r := range reqs {
		field := fmt.Sprintf("HostConfig.DeviceRequests[%d]", i)
		if len(r.Options) > 0 {
			return core.InvalidArgument(field, errors.New("driver options are not supported"))
		}
		var names []string
		switch {
		case r.Driver == "cdi":
			if r.Count != 0 {
				return core.InvalidArgument(field, errors.New("the cdi driver takes device IDs, not a count"))
			}
			if len(r.DeviceIDs) == 0 {
				return core.InvalidArgument(field, errors.New("the cdi driver needs device IDs (vendor.com/class=name)"))
			}
			for _, id := range r.DeviceIDs {
				if !core.IsCDIDevice(id) {
					return core.InvalidArgument(field, fmt.Errorf("%q is not a CDI device (vendor.com/class=name)", id))
				}
				names = append(names, id)
			}
		case r.Driver == "" || r.Driver == "nvidia":
			if err := checkGPUCapabilities(r.Capabilities); err != nil {
				return core.InvalidArgument(field, err)
			}
			switch {
			case len(r.DeviceIDs) > 0 && r.Count != 0:
				return core.InvalidArgument(field, errors.New("give a count or device IDs, not both"))
			case len(r.DeviceIDs) > 0:
				for _, id := range r.DeviceIDs {
					names = append(names, gpuKind+"="+id)
				}
			case r.Count == -1:
				names = append(names, gpuKind+"=all")
			case r.Count > 0:
				for n := 0; n < r.Count; n++ {
					names = append(names, gpuKind+"="+strconv.Itoa(n))
				}
			default:
				return core.InvalidArgument(field, fmt.Errorf("count %d is not -1 (all) or a number of GPUs", r.Count))
			}
		default:
			return core.InvalidArgument(field, fmt.Errorf("driver %q is not supported (cdi, or none/nvidia for GPUs through CDI)", r.Driver))
		}
		for _, n := range names {
			spec.Devices = append(spec.Devices, specs.LinuxDevice{Path: n})
		}
	}
	return nil
}

// checkGPUCapabilities accepts the capability lists of a GPU request: one
// AND-list holding "gpu".
func checkGPUCapabilities(caps [][]string) error {
	if len(caps) != 1 || !slices.Contains(caps[0], "gpu") {
		return fmt.Errorf("capabilities %v: a request without a driver must ask for [[\"gpu\", ...]]", caps)
	}
	for _, c := range caps[0] {
		if !slices.Contains(gpuCapabilities, c) {
			return fmt.Errorf("capability %q is not supported (%v)", c, gpuCapabilities)
		}
	}
	return nil
}

// deviceCgroupRules reads docker run --device-cgroup-rule.
func deviceCgroupRules(spec *core.ContainerSpec, rules []string) error {
	for i, r := range rules {
		rule, err := core.ParseDeviceCgroupRule(r)
		if err != nil {
			return core.InvalidArgument(fmt.Sprintf("HostConfig.DeviceCgroupRules[%d]", i), err)
		}
		spec.DeviceCgroupRules = append(spec.DeviceCgroupRules, rule)
	}
	return nil
}
