package dockerapi

import (
	"slices"
	"strings"
	"testing"

	containertypes "github.com/docker/docker/api/types/container"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestDeviceRequests(t *testing.T) {
	gpu := [][]string{{"gpu"}}
	tests := []struct {
		name    string
		reqs    []containertypes.DeviceRequest
		want    []string
		wantErr string
	}{
		{"gpus all", []containertypes.DeviceRequest{{Count: -1, Capabilities: gpu}}, []string{"nvidia.com/gpu=all"}, ""},
		{"gpus 2", []containertypes.DeviceRequest{{Count: 2, Capabilities: gpu}}, []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}, ""},
		{"gpus device=1,3", []containertypes.DeviceRequest{{DeviceIDs: []string{"1", "3"}, Capabilities: gpu}}, []string{"nvidia.com/gpu=1", "nvidia.com/gpu=3"}, ""},
		{"nvidia driver", []containertypes.DeviceRequest{{Driver: "nvidia", Count: -1, Capabilities: [][]string{{"gpu", "utility"}}}}, []string{"nvidia.com/gpu=all"}, ""},
		{"cdi driver", []containertypes.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"example.com/dev=zero"}}}, []string{"example.com/dev=zero"}, ""},
		{"cdi without ids", []containertypes.DeviceRequest{{Driver: "cdi"}}, nil, "needs device IDs"},
		{"cdi with a path", []containertypes.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"/dev/null"}}}, nil, "is not a CDI device"},
		{"other driver", []containertypes.DeviceRequest{{Driver: "amd", Count: 1}}, nil, `driver "amd" is not supported`},
		{"options", []containertypes.DeviceRequest{{Count: -1, Capabilities: gpu, Options: map[string]string{"a": "b"}}}, nil, "driver options"},
		{"no capabilities", []containertypes.DeviceRequest{{Count: -1}}, nil, "must ask for"},
		{"odd capability", []containertypes.DeviceRequest{{Count: -1, Capabilities: [][]string{{"gpu", "tpu"}}}}, nil, `capability "tpu"`},
		{"count and ids", []containertypes.DeviceRequest{{Count: 1, DeviceIDs: []string{"0"}, Capabilities: gpu}}, nil, "not both"},
		{"zero count", []containertypes.DeviceRequest{{Capabilities: gpu}}, nil, "count 0"},
	}
	for _, tc := range tests {
		var spec core.ContainerSpec
		err := deviceRequests(&spec, tc.reqs)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "HostConfig.DeviceRequests[0]") {
				t.Errorf("%s: %v, want an error naming the request with %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		var got []string
		for _, d := range spec.Devices {
			got = append(got, d.Path)
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
