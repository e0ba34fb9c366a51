package handlers

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/berth-project/berth/engine/internal/core"
)

// maxKubeApplyBody bounds the YAML a kube apply request carries.
const maxKubeApplyBody = 16 << 20

type kubeGenerateHandlers struct {
	gen     core.KubeGenerator
	applier core.KubeApplier
}

// generate answers GenerateKube and KubeGenerate: the YAML itself.
func (h kubeGenerateHandlers) generate(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Names      []string `query:"names"`
		Service    bool     `query:"service"`
		Type       string   `query:"type"`
		Replicas   int64    `query:"replicas"`
		NoTrunc    bool     `query:"notrunc"`
		PodmanOnly bool     `query:"podmanonly"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	if q.Replicas < 0 || q.Replicas > 1<<31-1 {
		writeError(w, core.InvalidArgument("replicas", fmt.Errorf("%d is not a replica count", q.Replicas)))
		return
	}
	out, err := h.gen.GenerateKube(r.Context(), core.KubeGenerateOptions{
		NamesOrIDs: q.Names, Service: q.Service, Type: q.Type, Replicas: int32(q.Replicas),
		NoTrunc: q.NoTrunc, PodmanOnly: q.PodmanOnly,
	})
	finishText(w, "application/yaml", out, err)
}

// apply answers KubeApply: "Deployed!" as Podman does, once every object
// was applied.
func (h kubeGenerateHandlers) apply(w http.ResponseWriter, r *http.Request) {
	q := struct {
		NamesOrIDs []string `query:"namesorids"`
		KubeConfig string   `query:"kubeconfig"`
		CACertFile string   `query:"cacertfile"`
		Namespace  string   `query:"namespace"`
		Service    bool     `query:"service"`
		File       string   `query:"file"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	if q.File != "" {
		writeError(w, core.InvalidArgument("file", errors.New("the engine does not read YAML files on its host: send the YAML as the request body")))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxKubeApplyBody+1))
	if err != nil {
		writeError(w, bodyError(err))
		return
	}
	if len(body) > maxKubeApplyBody {
		writeError(w, fmt.Errorf("%w: kube apply YAML larger than %d bytes", core.ErrTooLarge, maxKubeApplyBody))
		return
	}
	err = h.applier.KubeApply(r.Context(), body, core.KubeApplyOptions{
		NamesOrIDs: q.NamesOrIDs, Service: q.Service,
		KubeConfig: q.KubeConfig, CACertFile: q.CACertFile, Namespace: q.Namespace,
	})
	finishText(w, "text/plain; charset=us-ascii", []byte("Deployed!\n"), err)
}
