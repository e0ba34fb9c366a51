package handlers

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"

	"github.com/berth-project/berth/engine/internal/core"
)

// maxKubeYAML bounds a kube YAML body (an archive is bounded by the
// engine's expanded-size limit instead).
const maxKubeYAML = 8 << 20

type kubePlayHandlers struct {
	k core.KubePlayer
}

// kubePlayQuery is PlayKube's query as Podman 4.3.1 to 5.x clients send it;
// names are matched case-insensitively, as Podman's server does.
type kubePlayQuery struct {
	Annotations      map[string]string `query:"annotations"`
	Network          []string          `query:"network"`
	LogDriver        string            `query:"logdriver"`
	LogOptions       []string          `query:"logoptions"`
	Start            bool              `query:"start"`
	StaticIPs        []string          `query:"staticips"`
	StaticMACs       []string          `query:"staticmacs"`
	NoHosts          bool              `query:"nohosts"`
	NoHostname       bool              `query:"nohostname"`
	NoTrunc          bool              `query:"notrunc"`
	Userns           string            `query:"userns"`
	Replace          bool              `query:"replace"`
	PublishPorts     []string          `query:"publishports"`
	PublishAllPorts  bool              `query:"publishallports"`
	ServiceContainer bool              `query:"servicecontainer"`
	Wait             bool              `query:"wait"`
	Build            bool              `query:"build"`
	NoPodPrefix      bool              `query:"nopodprefix"`
	// Quiet only quiets pull progress on Podman's side; the engine prints none.
	Quiet bool `query:"quiet"`
}

// kubeClientOnly are parameters that name files on the client's machine
// (Podman's bindings send them, empty, with every play): a value is refused.
var kubeClientOnly = []string{"authfile", "certdir", "signaturepolicy", "seccompprofileroot", "configmaps", "contextdir"}

func (h kubePlayHandlers) play(w http.ResponseWriter, r *http.Request) {
	opts, err := kubePlayOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var report *core.KubePlayReport
	media := ""
	headers := r.Header
	if ct := headers.Get("Content-Type"); ct != "" {
		media, _, _ = mime.ParseMediaType(ct)
	}
	switch media {
	case "application/x-tar", "application/tar":
		report, err = h.k.PlayArchive(r.Context(), r.Body, opts)
	// curl --data-binary sends form-urlencoded, other clients octet-stream.
	case "", "text/plain", "application/json", "application/yaml", "application/x-yaml", "application/text", "text/yaml", "text/x-yaml",
		"application/x-www-form-urlencoded", "application/octet-stream":
		var data []byte
		if data, err = readKubeYAML(r.Body); err == nil {
			report, err = h.k.Play(r.Context(), data, opts)
		}
	default:
		err = core.InvalidArgument("Content-Type", fmt.Errorf("%q is not YAML nor application/x-tar", media))
	}
	finishJSON(w, http.StatusOK, report, err)
}

func kubePlayOptions(r *http.Request) (core.KubePlayOptions, error) {
	q := kubePlayQuery{Start: true}
	values := foldQuery(r)
	if err := decodeValues(values, &q); err != nil {
		return core.KubePlayOptions{}, err
	}
	for _, name := range kubeClientOnly {
		for _, v := range values[name] {
			if v != "" && v != "[]" {
				return core.KubePlayOptions{}, core.InvalidArgument(name, errors.New("names a file on the client's machine; the engine cannot read it"))
			}
		}
	}
	for _, v := range values["username"] {
		if v != "" {
			return core.KubePlayOptions{}, core.InvalidArgument("username", errors.New("send credentials in X-Registry-Auth"))
		}
	}
	switch {
	case q.NoHostname:
		return core.KubePlayOptions{}, core.InvalidArgument("noHostname", errors.New("pods always get their hostname"))
	case q.NoTrunc:
		return core.KubePlayOptions{}, core.InvalidArgument("noTrunc", errors.New("annotations longer than 63 characters are refused, not truncated"))
	}
	tlsVerify, auth, err := registryQuery(r)
	if err != nil {
		return core.KubePlayOptions{}, err
	}
	opts := core.KubePlayOptions{
		Annotations:      q.Annotations,
		Networks:         q.Network,
		LogDriver:        q.LogDriver,
		LogOptions:       q.LogOptions,
		NoHosts:          q.NoHosts,
		PublishPorts:     q.PublishPorts,
		PublishAllPorts:  q.PublishAllPorts,
		Replace:          q.Replace,
		Wait:             q.Wait,
		ServiceContainer: q.ServiceContainer,
		Userns:           q.Userns,
		NoPodPrefix:      q.NoPodPrefix,
		TLSVerify:        tlsVerify,
		Auth:             auth,
	}
	if _, ok := values["start"]; ok {
		opts.Start = &q.Start
	}
	if _, ok := values["build"]; ok {
		opts.Build = &q.Build
	}
	for _, s := range q.StaticIPs {
		ip := net.ParseIP(s)
		if ip == nil {
			return core.KubePlayOptions{}, core.InvalidArgument("staticIPs", fmt.Errorf("%q is not an IP address", s))
		}
		opts.StaticIPs = append(opts.StaticIPs, ip)
	}
	for _, s := range q.StaticMACs {
		mac, err := net.ParseMAC(s)
		if err != nil {
			return core.KubePlayOptions{}, core.InvalidArgument("staticMACs", err)
		}
		opts.StaticMACs = append(opts.StaticMACs, mac)
	}
	return opts, nil
}

func (h kubePlayHandlers) down(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Force bool `query:"force"`
	}
	if !queryInto(w, r, &q) {
		return
	}
	data, err := readKubeYAML(r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	report, err := h.k.Down(r.Context(), data, core.KubeDownOptions{Force: q.Force})
	finishJSON(w, http.StatusOK, report, err)
}

// readKubeYAML reads a YAML body of at most maxKubeYAML bytes.
func readKubeYAML(body io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxKubeYAML+1))
	if err != nil {
		return nil, core.InvalidArgument("body", err)
	}
	if len(data) > maxKubeYAML {
		return nil, fmt.Errorf("the YAML is larger than %d bytes: %w", maxKubeYAML, core.ErrTooLarge)
	}
	return data, nil
}
