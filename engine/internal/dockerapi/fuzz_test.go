package dockerapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"

	containertypes "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	networktypes "github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// The Docker front door's parsers of what a client sends: each must take
// any input without panicking, and refuse what it cannot honour with a
// 400 that names the member or parameter at fault (never a 500).

// badRejection says what is wrong with err as an answer to a bad request,
// or "" when err is nil or a 400 naming its field.
func badRejection(err error) string {
	var fe *core.FieldError
	switch {
	case err == nil:
		return ""
	case !errors.As(err, &fe) || fe.Field == "":
		return "rejection without a field"
	case httpwire.StatusOf(err) != http.StatusBadRequest:
		return "rejection that is not a 400"
	}
	return ""
}

// FuzzDockerCreate: a container create body through the translation and
// then the engine's own validation of the spec it became.
func FuzzDockerCreate(f *testing.F) {
	f.Add([]byte(`{"Image":"busybox","Cmd":["true"],"HostConfig":{"NetworkMode":"default"}}`), "web")
	f.Add([]byte(`{"Image":"busybox","Env":["A=1","B"],"StopSignal":"SIGINT","StopTimeout":5,"ExposedPorts":{"80/tcp":{}},"Volumes":{"/anon":{}},`+
		`"Healthcheck":{"Test":["CMD-SHELL","true"],"Interval":1000000000,"Retries":3},`+
		`"HostConfig":{"Binds":["/host:/ctr:ro,Z","named:/data"],"PortBindings":{"80/tcp":[{"HostIp":"127.0.0.1","HostPort":"8080-8081"}]},`+
		`"RestartPolicy":{"Name":"on-failure","MaximumRetryCount":3},"Tmpfs":{"/tmp":"size=1m"},"LogConfig":{"Type":"json-file","Config":{"max-size":"10m","max-file":"3"}},`+
		`"Memory":67108864,"MemorySwap":-1,"NanoCpus":500000000,"PidsLimit":50,"Ulimits":[{"Name":"nofile","Soft":1024,"Hard":2048}],`+
		`"Mounts":[{"Type":"volume","Source":"v","Target":"/v","VolumeOptions":{"NoCopy":true}},{"Type":"tmpfs","Target":"/t","TmpfsOptions":{"SizeBytes":1024}}],`+
		`"CapAdd":["NET_ADMIN"],"CapDrop":["ALL"],"SecurityOpt":["no-new-privileges","seccomp=unconfined","apparmor=unconfined"],`+
		`"Devices":[{"PathOnHost":"/dev/null","PathInContainer":"/dev/x","CgroupPermissions":"rwm"}],"DeviceCgroupRules":["c 1:3 rwm"],`+
		`"DeviceRequests":[{"Driver":"nvidia","Count":-1,"Capabilities":[["gpu"]]}],"Links":["db:data"],"PidMode":"host","IpcMode":"shareable","ExtraHosts":["h:10.0.0.1"]},`+
		`"NetworkingConfig":{"EndpointsConfig":{"front":{"Aliases":["a"],"IPAMConfig":{"IPv4Address":"10.1.0.5"},"MacAddress":"02:42:ac:11:00:02"}}}}`), "app")
	f.Add([]byte(`{"Image":"busybox","HostConfig":{"NetworkMode":"container:x","PortBindings":{"bad":[{}]}}}`), "")
	f.Add([]byte(`{"Image":"busybox","HostConfig":{"Binds":[":::"],"Mounts":[{"Type":"bind"}],"CpusetCpus":"0-","BlkioWeightDevice":[{"Path":"","Weight":9}]}}`), "/x")
	f.Add([]byte(`{"Image":"busybox","User":"1:2","WorkingDir":"rel","HostConfig":{"RestartPolicy":{"Name":"always"},"AutoRemove":true,"ShmSize":-1,"OomScoreAdj":2000}}`), "a b")
	f.Add([]byte(`{"Config":null}`), "")
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		var req containertypes.CreateRequest
		if json.Unmarshal(body, &req) != nil || req.Config == nil {
			return
		}
		if req.HostConfig == nil {
			req.HostConfig = &containertypes.HostConfig{}
		}
		s := &server{cfg: Config{DefaultNetwork: "podman"}}
		spec, err := s.toSpec(name, req.Config, req.HostConfig, req.NetworkingConfig)
		if err == nil {
			err = spec.Validate()
		}
		if why := badRejection(err); why != "" {
			t.Fatalf("%s: %v", why, err)
		}
		if err == nil && spec.Image != req.Config.Image {
			t.Fatalf("image %q became %q", req.Config.Image, spec.Image)
		}
	})
}

// FuzzDockerCreateStrings: the string members of a create request that
// the translation splits and parses itself (binds, ports, tmpfs options,
// devices, security options, namespace modes, links, a mount's source
// and options, a log option, the stop signal), each in an otherwise valid
// body, where byte-wise mutation of whole JSON bodies seldom reaches.
func FuzzDockerCreateStrings(f *testing.F) {
	f.Add("/host:/ctr:ro,Z", "80/tcp", "127.0.0.1", "8080-8081", "size=1m,mode=1777", "/dev/null:/dev/x:rwm", "no-new-privileges", "container:db", "db:data", "10m", "SIGINT")
	f.Add("named:/data:nocopy", "53/udp", "::1", "", "noexec", "c 1:3 rwm", "seccomp={\"defaultAction\":1}", "host", "/a:/b", "x", "RTMIN+3")
	f.Add("::", "1-2/sctp", "[::1]", "70000", "size=-1", "/dev/null", "label:disable", "ns:/proc/1/ns/pid", ":", "-1", "99")
	f.Fuzz(func(t *testing.T, bind, port, hostIP, hostPort, tmpfs, device, secopt, mode, link, logSize, signal string) {
		cfg := &containertypes.Config{Image: "busybox", StopSignal: signal, ExposedPorts: nat.PortSet{nat.Port(port): {}}}
		hc := &containertypes.HostConfig{
			Binds:        []string{bind},
			PortBindings: nat.PortMap{nat.Port(port): {{HostIP: hostIP, HostPort: hostPort}}},
			Tmpfs:        map[string]string{"/t": tmpfs},
			SecurityOpt:  []string{secopt},
			PidMode:      containertypes.PidMode(mode),
			IpcMode:      containertypes.IpcMode(mode),
			NetworkMode:  containertypes.NetworkMode(mode),
			CgroupnsMode: containertypes.CgroupnsMode(mode),
			Links:        []string{link},
			LogConfig:    containertypes.LogConfig{Type: "json-file", Config: map[string]string{"max-size": logSize}},
			Resources: containertypes.Resources{
				Devices:           []containertypes.DeviceMapping{{PathOnHost: device, PathInContainer: device, CgroupPermissions: "rwm"}},
				DeviceCgroupRules: []string{device},
			},
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: bind, Target: "/m", BindOptions: &mount.BindOptions{Propagation: mount.Propagation(tmpfs)}}},
		}
		s := &server{cfg: Config{DefaultNetwork: "podman"}}
		spec, err := s.toSpec("fuzz", cfg, hc, nil)
		if err == nil {
			err = spec.Validate()
		}
		if why := badRejection(err); why != "" {
			t.Fatalf("%s: %v", why, err)
		}
	})
}

// FuzzDockerNetworkCreate: a network create body; an accepted one's
// subnets hold their gateways' and lease ranges' addresses.
func FuzzDockerNetworkCreate(f *testing.F) {
	f.Add([]byte(`{"Name":"front","Driver":"bridge","Attachable":true,"Options":{"com.docker.network.bridge.name":"br9","com.docker.network.driver.mtu":"1400"},` +
		`"IPAM":{"Driver":"default","Config":[{"Subnet":"10.9.0.0/24","Gateway":"10.9.0.1","IPRange":"10.9.0.128/25"}]},"Labels":{"a":"b"},"EnableIPv6":false}`))
	f.Add([]byte(`{"Name":"mv","Driver":"macvlan","Options":{"parent":"eth0","macvlan_mode":"bridge"},"IPAM":{"Config":[{"Subnet":"fd00::/64","IPRange":"fd00::/120"}]}}`))
	f.Add([]byte(`{"Name":"x","IPAM":{"Config":[{"Subnet":"10.0.0.0/8","IPRange":"11.0.0.0/8","AuxiliaryAddresses":{"a":"10.0.0.2"}}]}}`))
	f.Add([]byte(`{"Name":"x","Ingress":true,"ConfigFrom":{"Network":"y"},"EnableIPv4":false,"Scope":"swarm"}`))
	f.Add([]byte(`{"Name":""}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req networktypes.CreateRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		n, err := networkFromRequest(req)
		if why := badRejection(err); why != "" {
			t.Fatalf("%s: %v", why, err)
		}
		if err != nil {
			return
		}
		if n.Name != req.Name || n.Name == "" {
			t.Fatalf("name %q became %q", req.Name, n.Name)
		}
		for _, sub := range n.Subnets {
			if lr := sub.LeaseRange; lr != nil && (!sub.Subnet.IPNet.Contains(lr.StartIP) || !sub.Subnet.IPNet.Contains(lr.EndIP)) {
				t.Fatalf("lease range %v-%v outside subnet %v", lr.StartIP, lr.EndIP, sub.Subnet.IPNet)
			}
		}
	})
}

// FuzzDockerBuildQuery: the query of a build request.
func FuzzDockerBuildQuery(f *testing.F) {
	f.Add(`t=app:1&t=app:latest&dockerfile=Dockerfile.dev&target=base&nocache=1&pull=1&buildargs={"A":"1","B":null}&labels={"l":"v"}&networkmode=host&extrahosts=h:10.0.0.1&memory=1048576&shmsize=65536&cpuquota=50000&cpuperiod=100000`)
	f.Add(`buildargs=[1]&labels=x`)
	f.Add(`version=2&platform=windows&cachefrom=["x"]`)
	f.Add(`memory=lots&networkmode=bridge&q=true&rm=1`)
	f.Add(`ulimits=[{"Name":"nofile","Hard":200,"Soft":100}]&cpushares=512&memswap=-1&cgroupparent=/x&securityopt=seccomp=unconfined`)
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		opts, err := buildOptions(&query{v: v})
		if why := badRejection(err); why != "" {
			t.Fatalf("%s: %v", why, err)
		}
		if err == nil && opts.Memory < 0 {
			t.Fatalf("negative memory %d accepted", opts.Memory)
		}
	})
}

// FuzzDockerQueryFilters: the filters parameter of the list routes, then
// the translations of the container and network filters.
func FuzzDockerQueryFilters(f *testing.F) {
	f.Add(`{"status":{"running":true},"network":{"bridge":true},"is-task":{"false":true},"label":{"a=b":true}}`)
	f.Add(`{"type":["custom"],"name":["bridge","front"],"id":["abc"]}`)
	f.Add(`{"status":{"sleeping":true}}`)
	f.Add(`{"type":{"overlay":true}}`)
	f.Add(`[1,2]`)
	f.Fuzz(func(t *testing.T, raw string) {
		s := &server{cfg: Config{DefaultNetwork: "podman"}}
		q := &query{v: url.Values{"filters": {raw}}}
		filters := q.filters()
		if why := badRejection(q.err); why != "" {
			t.Fatalf("%s: %v", why, q.err)
		}
		nf, err := s.networkFilters(filters)
		if why := badRejection(err); why != "" {
			t.Fatalf("network filters: %s: %v", why, err)
		}
		for _, names := range [][]string{nf.engine["name"], nf.engine["id"]} {
			for _, n := range names {
				if n == "bridge" || n == "default" {
					t.Fatalf("Docker's name %q was passed on to the engine", n)
				}
			}
		}
		if why := badRejection(s.translateContainerFilters(filters)); why != "" {
			t.Fatalf("container filters: %s", why)
		}
	})
}

// FuzzDockerRegistryAuth: the X-Registry-Auth header of pull and push.
func FuzzDockerRegistryAuth(f *testing.F) {
	f.Add(`eyJ1c2VybmFtZSI6InUiLCJwYXNzd29yZCI6InAifQ==`) // {"username":"u","password":"p"}
	f.Add(`eyJ1c2VybmFtZSI6InUiLCJwYXNzd29yZCI6InAifQ`)
	f.Add(`e30=`)
	f.Add(`null`)
	f.Add(`%%%`)
	f.Fuzz(func(t *testing.T, header string) {
		r, _ := http.NewRequest(http.MethodPost, "/images/create", nil)
		r.Header.Set("X-Registry-Auth", header)
		auth, err := registryAuthHeader(r)
		if why := badRejection(err); why != "" {
			t.Fatalf("%s: %v", why, err)
		}
		if auth != nil && (auth.Default == nil || auth.Default.Username == "" && auth.Default.Password == "" && auth.Default.IdentityToken == "") {
			t.Fatalf("empty credentials passed on: %+v", auth)
		}
	})
}
