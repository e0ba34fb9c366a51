package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// buildQuery is the build routes' query as Podman's clients send it.
type buildQuery struct {
	Dockerfile    string   `query:"dockerfile"`
	Tags          []string `query:"t"`
	BuildArgs     string   `query:"buildargs"`
	Labels        string   `query:"labels"`
	Annotations   string   `query:"annotations"`
	Target        string   `query:"target"`
	Pull          bool     `query:"pull"`
	PullPolicy    string   `query:"pullpolicy"`
	TLSVerify     bool     `query:"tlsVerify"`
	NoCache       bool     `query:"nocache"`
	Layers        bool     `query:"layers"`
	Rm            bool     `query:"rm"`
	ForceRm       bool     `query:"forcerm"`
	Squash        bool     `query:"squash"`
	Platform      string   `query:"platform"`
	NetworkMode   int      `query:"networkmode"`
	Network       string   `query:"network"`
	NSOptions     string   `query:"nsoptions"`
	ExtraHosts    string   `query:"extrahosts"`
	Secrets       string   `query:"secrets"`
	Output        string   `query:"output"`
	Outputs       string   `query:"outputs"`
	Quiet         bool     `query:"q"`
	CPUPeriod     uint64   `query:"cpuperiod"`
	CPUQuota      int64    `query:"cpuquota"`
	Memory        int64    `query:"memory"`
	ShmSize       int64    `query:"shmsize"`
	Ulimits       string   `query:"ulimits"`
	HTTPProxy     bool     `query:"httpproxy"`
	IdentityLabel bool     `query:"identitylabel"`
	Format        string   `query:"format"`
	OutputFormat  string   `query:"outputformat"`
	IDMapping     string   `query:"idmappingoptions"`
	Isolation     int      `query:"isolation"`
	Jobs          int      `query:"jobs"`
	OmitHistory   bool     `query:"omithistory"`
	Seccomp       string   `query:"seccomp"`
	AddCaps       string   `query:"addcaps"`
	DropCaps      string   `query:"dropcaps"`
	DNSServers    string   `query:"dnsservers"`
	DNSSearch     string   `query:"dnssearch"`
	DNSOptions    string   `query:"dnsoptions"`
	Devices       string   `query:"devices"`
	LocalContext  string   `query:"localcontextdir"`
	BuildContexts string   `query:"additionalbuildcontexts"`
	Retry         int      `query:"retry"`
	RetryDelay    string   `query:"retry-delay"`
	Compression   string   `query:"compressionFormat"`
	CompressLevel int      `query:"compressionLevel"`
	ForceCompress bool     `query:"forceCompressionFormat"`
}

// contentTypeHeader names the header a context's type is read from.
const contentTypeHeader = "Content-Type"

// buildUnsupported are build parameters the engine does not implement;
// each is refused when given a value other than its neutral one.
var buildUnsupported = map[string]string{
	"cachefrom": "", "cacheto": "", "cachettl": "", "cgroupparent": "", "cpusetcpus": "",
	"cpusetmems": "", "cpushares": "0", "apparmor": "", "labelopts": "",
	"manifest": "", "memswap": "0", "securityopt": "", "timestamp": "", "unsetenv": "",
	"unsetlabel": "", "setenv": "", "envs": "", "remote": "", "allplatforms": "0",
	"compression": "", "from": "", "osfeature": "", "osversion": "", "rusage": "0",
	"rusagelogfile": "", "excludes": "", "ignorefile": "", "registry": "", "squash-all": "0",
	"cppflags": "", "sbom": "", "volume": "", "skipunusedstages": "1",
	"layerLabel": "", "groupadd": "", "inheritlabels": "1", "inheritannotations": "1",
	"createdannotation": "1", "sourcedateepoch": "", "rewritetimestamp": "0",
	"unsetannotation": "", "compatvolumes": "0", "noHosts": "0", "nohosts": "0",
}

// buildKnown is every parameter buildQuery reads.
var buildKnown = func() map[string]bool {
	known := map[string]bool{}
	for _, f := range queryNames(buildQuery{}) {
		known[f] = true
	}
	return known
}()

// buildImage is ImageBuild: the body is the context as a tar stream.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get(contentTypeHeader); ct != "" && ct != "application/x-tar" && ct != "application/tar" {
		writeError(w, core.InvalidArgument("Content-Type", fmt.Errorf("%q is not supported, send application/x-tar", ct)))
		return
	}
	opts, q, err := buildOptions(r)
	if err == nil && q.LocalContext != "" {
		err = core.InvalidArgument("localcontextdir", errors.New("is only read by POST /local/build"))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.runBuild(w, opts, func(o core.BuildOptions) (string, error) {
		return s.deps.Build.Build(r.Context(), r.Body, o)
	})
}

// buildLocal is Podman 5's local build: the context is a directory on the
// engine's host.
func (s *Server) buildLocal(w http.ResponseWriter, r *http.Request) {
	opts, q, err := buildOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	dir := q.LocalContext
	for i, f := range opts.Containerfiles {
		if filepath.IsAbs(f) {
			rel, rerr := filepath.Rel(dir, f)
			if rerr != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				writeError(w, core.InvalidArgument("dockerfile", fmt.Errorf("%q is not inside localcontextdir", f)))
				return
			}
			opts.Containerfiles[i] = rel
		}
	}
	s.runBuild(w, opts, func(o core.BuildOptions) (string, error) {
		return s.deps.Build.BuildDir(r.Context(), dir, o)
	})
}

// runBuild streams a build's progress as {"stream": ...} lines and ends
// with the image ID, as a stream line (what Podman 4 clients read) that
// also carries {"aux":{"ID":...}} (what newer clients read). A failure
// before any output gets its own status; later it is an error line.
func (s *Server) runBuild(w http.ResponseWriter, opts core.BuildOptions, build func(core.BuildOptions) (string, error)) {
	stream := newJSONStream(w)
	opts.Progress = stream.progress(func(text string) any { return buildLine{Stream: text} })
	id, err := build(opts)
	if err != nil {
		if stream.started() {
			stream.send(buildLine{Error: err.Error(), ErrorDetail: &buildErrorDetail{Message: err.Error()}})
			return
		}
		writeError(w, err)
		return
	}
	hexID := strings.TrimPrefix(id, "sha256:")
	stream.send(buildLine{Stream: hexID + "\n", Aux: &buildAux{ID: "sha256:" + hexID}})
}

// buildLine is one line of the build stream.
type buildLine struct {
	Stream      string            `json:"stream,omitempty"`
	Aux         *buildAux         `json:"aux,omitempty"`
	ErrorDetail *buildErrorDetail `json:"errorDetail,omitempty"`
	Error       string            `json:"error,omitempty"`
}

type buildAux struct {
	ID string `json:"ID"`
}

type buildErrorDetail struct {
	Message string `json:"message"`
}

// buildOptions decodes and checks a build request's query.
func buildOptions(r *http.Request) (core.BuildOptions, buildQuery, error) {
	values := r.URL.Query()
	q := buildQuery{Rm: true, IdentityLabel: true, Jobs: 1, TLSVerify: true}
	if err := checkBuildParams(values); err != nil {
		return core.BuildOptions{}, q, err
	}
	if err := decodeValues(values, &q); err != nil {
		return core.BuildOptions{}, q, err
	}
	opts := core.BuildOptions{
		Target: q.Target, NoCache: q.NoCache, Layers: q.Layers, Quiet: q.Quiet,
		CPUPeriod: q.CPUPeriod, CPUQuota: q.CPUQuota, Memory: q.Memory, ShmSize: q.ShmSize,
		IdentityLabel: q.IdentityLabel, HTTPProxy: q.HTTPProxy,
	}
	var err error
	for _, t := range q.Tags {
		if t != "" {
			opts.Tags = append(opts.Tags, t)
		}
	}
	if opts.Containerfiles, err = stringList("dockerfile", q.Dockerfile); err != nil {
		return opts, q, err
	}
	if q.BuildArgs != "" {
		if err := json.Unmarshal([]byte(q.BuildArgs), &opts.BuildArgs); err != nil {
			return opts, q, core.InvalidArgument("buildargs", errors.New("must be a JSON object of strings"))
		}
	}
	if opts.Labels, err = keyValueList("labels", q.Labels); err != nil {
		return opts, q, err
	}
	if opts.Annotations, err = keyValueList("annotations", q.Annotations); err != nil {
		return opts, q, err
	}
	for _, list := range []struct {
		field string
		raw   string
		dst   *[]string
	}{
		{"extrahosts", q.ExtraHosts, &opts.ExtraHosts}, {"ulimits", q.Ulimits, &opts.Ulimits},
		{"addcaps", q.AddCaps, &opts.CapAdd}, {"dropcaps", q.DropCaps, &opts.CapDrop},
		{"dnsservers", q.DNSServers, &opts.DNSServers}, {"dnssearch", q.DNSSearch, &opts.DNSSearch},
		{"dnsoptions", q.DNSOptions, &opts.DNSOptions}, {"devices", q.Devices, &opts.Devices},
	} {
		if *list.dst, err = stringList(list.field, list.raw); err != nil {
			return opts, q, err
		}
	}
	// Podman's client always names its default profile's file: the
	// builder reads that as the engine's default.
	opts.SeccompProfilePath = q.Seccomp
	if opts.PullPolicy, err = buildPullPolicy(values, q); err != nil {
		return opts, q, err
	}
	// Podman's client sends --creds as X-Registry-Auth and --authfile (or
	// the default auth file) as X-Registry-Config; both reach FROM pulls.
	if opts.Auth, err = registryAuth(r.Header); err != nil {
		return opts, q, err
	}
	if _, set := values["tlsVerify"]; set {
		opts.TLSVerify = &q.TLSVerify
	}
	if opts.Format, err = buildFormat(q); err != nil {
		return opts, q, err
	}
	retries, err := transferRetries(q.Retry, q.RetryDelay, "retry-delay")
	if err != nil {
		return opts, q, err
	}
	opts.PullRetries, opts.PullRetryDelay = retries.Retries, retries.RetryDelay
	if err := checkBuildCompression(values, q); err != nil {
		return opts, q, err
	}
	if opts.Network, err = buildNetwork(values, q); err != nil {
		return opts, q, err
	}
	if opts.Secrets, err = buildSecrets(q.Secrets); err != nil {
		return opts, q, err
	}
	return opts, q, checkBuildNeutral(values, q)
}

// checkBuildParams refuses unknown parameters and unsupported ones that
// carry a value.
func checkBuildParams(values url.Values) error {
	for name, given := range values {
		if buildKnown[name] {
			continue
		}
		neutral, listed := buildUnsupported[name]
		if !listed {
			return core.InvalidArgument(name, errors.New("unknown build parameter"))
		}
		for _, v := range given {
			if v != neutral && v != "" && v != "[]" && v != "{}" && v != "null" && !(neutral == "0" && v == "false") && !(neutral == "1" && v == "true") {
				return core.InvalidArgument(name, fmt.Errorf("%q is not supported by this engine", v))
			}
		}
	}
	return nil
}

// checkBuildNeutral refuses parameters buildQuery reads but only accepts
// with the value meaning "what the engine does anyway".
func checkBuildNeutral(values url.Values, q buildQuery) error {
	if !q.Rm {
		return core.InvalidArgument("rm", errors.New("intermediate containers are always removed"))
	}
	if _, set := values["forcerm"]; set && !q.ForceRm {
		return core.InvalidArgument("forcerm", errors.New("containers of failed steps are always removed"))
	}
	if q.Squash {
		return core.InvalidArgument("squash", errors.New("squashing is not supported"))
	}
	if q.OmitHistory {
		return core.InvalidArgument("omithistory", errors.New("history entries are always recorded"))
	}
	if q.Outputs != "" && q.Outputs != "[]" {
		return core.InvalidArgument("outputs", errors.New("build outputs other than the image are not supported"))
	}
	if q.Output != "" && !containsString(q.Tags, q.Output) {
		return core.InvalidArgument("output", fmt.Errorf("%q must be one of the tags (t)", q.Output))
	}
	if q.BuildContexts != "" && q.BuildContexts != "{}" && q.BuildContexts != "null" {
		return core.InvalidArgument("additionalbuildcontexts", errors.New("additional build contexts are not supported"))
	}
	if q.Isolation != 0 && q.Isolation != 1 {
		return core.InvalidArgument("isolation", fmt.Errorf("%d is not supported: RUN steps always run under the OCI runtime", q.Isolation))
	}
	if q.Jobs < 0 {
		return core.InvalidArgument("jobs", errors.New("must not be negative"))
	}
	if q.IDMapping != "" {
		var m struct {
			HostUIDMapping, HostGIDMapping bool
			UIDMap, GIDMap                 []json.RawMessage
			AutoUserNs                     bool
		}
		if err := json.Unmarshal([]byte(q.IDMapping), &m); err != nil {
			return core.InvalidArgument("idmappingoptions", err)
		}
		if !m.HostUIDMapping || !m.HostGIDMapping || len(m.UIDMap) > 0 || len(m.GIDMap) > 0 || m.AutoUserNs {
			return core.InvalidArgument("idmappingoptions", errors.New("only the host's ID mapping is supported"))
		}
	}
	if err := checkPlatform(q.Platform); err != nil {
		return err
	}
	return nil
}

// checkPlatform accepts no platform or the engine's own.
func checkPlatform(p string) error {
	for _, one := range strings.Split(p, ",") {
		one = strings.TrimSpace(one)
		if one == "" || one == "/" {
			continue
		}
		parts := strings.Split(one, "/")
		if (parts[0] != "" && parts[0] != runtime.GOOS) || (len(parts) > 1 && parts[1] != "" && parts[1] != runtime.GOARCH) || len(parts) > 3 {
			return core.InvalidArgument("platform", fmt.Errorf("%q: only %s/%s is built here", one, runtime.GOOS, runtime.GOARCH))
		}
	}
	return nil
}

// buildPullPolicy reads pullpolicy, or Docker's pull=true (always).
func buildPullPolicy(values url.Values, q buildQuery) (core.PullPolicy, error) {
	if q.PullPolicy != "" {
		p, err := core.ParsePullPolicy(q.PullPolicy)
		if err != nil {
			return "", core.InvalidArgument("pullpolicy", err)
		}
		return p, nil
	}
	if _, set := values["pull"]; set && q.Pull {
		return core.PullAlways, nil
	}
	return core.PullMissing, nil
}

// buildFormat reads format (oci, docker) or Podman's outputformat (a
// manifest MIME type).
func buildFormat(q buildQuery) (string, error) {
	switch q.OutputFormat {
	case "":
	case "application/vnd.oci.image.manifest.v1+json":
		if q.Format != "" && q.Format != "oci" {
			return "", core.InvalidArgument("format", errors.New("contradicts outputformat"))
		}
		return "oci", nil
	case "application/vnd.docker.distribution.manifest.v2+json":
		if q.Format != "" && q.Format != "docker" {
			return "", core.InvalidArgument("format", errors.New("contradicts outputformat"))
		}
		return "docker", nil
	default:
		return "", core.InvalidArgument("outputformat", fmt.Errorf("%q is not an OCI or Docker schema 2 manifest type", q.OutputFormat))
	}
	switch q.Format {
	case "", "oci":
		return "oci", nil
	case "docker":
		return "docker", nil
	}
	return "", core.InvalidArgument("format", fmt.Errorf("%q is not oci or docker", q.Format))
}

// buildNetwork reads networkmode and nsoptions (Podman) or network
// (Docker) into the network of RUN steps.
func buildNetwork(values url.Values, q buildQuery) (core.BuildNetwork, error) {
	network := core.BuildNetworkPrivate
	if q.NSOptions != "" {
		var opts []struct {
			Name string
			Host bool
			Path string
		}
		if err := json.Unmarshal([]byte(q.NSOptions), &opts); err != nil {
			return "", core.InvalidArgument("nsoptions", err)
		}
		for _, o := range opts {
			switch {
			case o.Path != "":
				return "", core.InvalidArgument("nsoptions", fmt.Errorf("joining the %s namespace at %s is not supported", o.Name, o.Path))
			case o.Name == "network" && o.Host:
				network = core.BuildNetworkHost
			case o.Name == "user" && o.Host, o.Name == "network" && !o.Host:
			default:
				return "", core.InvalidArgument("nsoptions", fmt.Errorf("%s namespace option is not supported", o.Name))
			}
		}
	}
	switch q.NetworkMode {
	case 0, 1:
	case 2:
		if network != core.BuildNetworkHost {
			return "", core.InvalidArgument("networkmode", errors.New("RUN steps have the host network or their own loopback only"))
		}
	default:
		return "", core.InvalidArgument("networkmode", fmt.Errorf("%d is not a network policy", q.NetworkMode))
	}
	if _, set := values["network"]; set {
		switch q.Network {
		case "", "default", "none", "private":
		case "host":
			network = core.BuildNetworkHost
		default:
			return "", core.InvalidArgument("network", fmt.Errorf("%q is not supported (host, none, default)", q.Network))
		}
	}
	return network, nil
}

// buildSecrets reads Podman's secrets: a JSON list of "id=ID,src=PATH"
// (the client puts each secret's file into the context).
func buildSecrets(raw string) ([]core.BuildSecret, error) {
	list, err := stringList("secrets", raw)
	if err != nil {
		return nil, err
	}
	var out []core.BuildSecret
	for _, s := range list {
		var sec core.BuildSecret
		for _, field := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "id":
				sec.ID = v
			case "src", "source":
				sec.Source = v
			case "type":
				if v != "file" {
					return nil, core.InvalidArgument("secrets", fmt.Errorf("%q: only file secrets are supported", s))
				}
			default:
				return nil, core.InvalidArgument("secrets", fmt.Errorf("%q: unknown field %q", s, k))
			}
		}
		if sec.ID == "" && sec.Source != "" {
			sec.ID = filepath.Base(sec.Source)
		}
		out = append(out, sec)
	}
	return out, nil
}

// stringList reads a JSON list of strings, or one plain string.
func stringList(field, raw string) ([]string, error) {
	if raw == "" {
		return nil, nil
	}
	if !strings.HasPrefix(strings.TrimSpace(raw), "[") {
		return []string{raw}, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, core.InvalidArgument(field, errors.New("must be a JSON list of strings"))
	}
	return out, nil
}

// keyValueList reads labels or annotations: a JSON list of "k=v" (Podman)
// or a JSON object (Docker).
func keyValueList(field, raw string) ([]string, error) {
	if strings.HasPrefix(strings.TrimSpace(raw), "{") {
		var m map[string]string
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return nil, core.InvalidArgument(field, errors.New("must be a JSON object of strings"))
		}
		out := make([]string, 0, len(m))
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		return out, nil
	}
	list, err := stringList(field, raw)
	if err != nil {
		return nil, err
	}
	for _, kv := range list {
		if k, _, _ := strings.Cut(kv, "="); k == "" {
			return nil, core.InvalidArgument(field, fmt.Errorf("%q has no key", kv))
		}
	}
	return list, nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checkBuildCompression checks the compression a Podman 5 or 6 client asks
// for. A build commits into the engine's store, which keeps layers
// uncompressed, as Podman's containers-storage does: the format applies
// where layers are written compressed (a push, which takes its own), so a
// known one changes nothing here and an unknown one is refused.
func checkBuildCompression(values url.Values, q buildQuery) error {
	switch q.Compression {
	case "", "gzip", "zstd", "zstd:chunked", "uncompressed":
	default:
		return core.InvalidArgument("compressionFormat", fmt.Errorf("%q is not a compression format (gzip, zstd, zstd:chunked, uncompressed)", q.Compression))
	}
	if _, set := values["compressionLevel"]; set && (q.CompressLevel < 0 || q.CompressLevel > 22) {
		return core.InvalidArgument("compressionLevel", fmt.Errorf("%d is outside 0 to 22", q.CompressLevel))
	}
	return nil
}
