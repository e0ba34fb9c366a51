package handlers

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-project/berth/engine/internal/core"
)

type networkHandlers struct {
	n core.Networks
	// listGzip holds the compressed unfiltered listing.
	listGzip *gzipMemo
}

// gzipMemo compresses a listing once for as long as it stays the same: the
// network backend answers an unchanged listing with the same slice.
type gzipMemo struct {
	mu  sync.Mutex
	src []byte
	gz  []byte
}

// of answers data and a newline, gzip-compressed.
func (g *gzipMemo) of(data []byte) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(data) > 0 && len(g.src) == len(data) && &g.src[0] == &data[0] {
		return g.gz
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(data)
	zw.Write([]byte{'\n'})
	zw.Close()
	g.src, g.gz = data, buf.Bytes()
	return g.gz
}

// writeListing answers 200 with an encoded listing and a newline, sized,
// in one write. With gz (a listing that stays the same until a change), a
// remote client that takes gzip gets it compressed once a change.
func writeListing(w http.ResponseWriter, r *http.Request, data []byte, gz *gzipMemo) {
	w.Header().Set("Content-Type", "application/json")
	if gz != nil {
		w.Header().Set("Vary", "Accept-Encoding")
		if acceptsGzip(r) && !localPeer(r) {
			body := gz.of(data)
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusOK)
			w.Write(body)
			return
		}
	}
	// data may be shared: the newline goes in a write of its own.
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
	w.Write([]byte{'\n'})
}

// localPeer reports whether the request came over a local socket (a Unix
// socket or a loopback address), where bytes cost nothing and compressing
// them would only spend both sides' CPU.
func localPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		// Unix sockets have no host:port peer ("@" or empty).
		return r.RemoteAddr == "" || r.RemoteAddr == "@"
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(strings.Join(r.Header.Values("Accept-Encoding"), ","), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

type networkCreateQuery struct {
	IgnoreIfExists bool `query:"ignoreIfExists"`
}

func (h networkHandlers) create(w http.ResponseWriter, r *http.Request) {
	var q networkCreateQuery
	if !queryInto(w, r, &q) {
		return
	}
	var req core.Network
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, err)
		return
	}
	n, err := h.n.Create(r.Context(), req, q.IgnoreIfExists)
	finishJSON(w, http.StatusOK, n, err)
}

type networkFilterQuery struct {
	Filters map[string][]string `query:"filters"`
}

// networkListEncoder is a Networks that answers listings already encoded.
type networkListEncoder interface {
	ListJSON(ctx context.Context, filters map[string][]string) ([]byte, error)
}

func (h networkHandlers) list(w http.ResponseWriter, r *http.Request) {
	var q networkFilterQuery
	if !queryInto(w, r, &q) {
		return
	}
	filters := filtersForClient(r, q.Filters)
	if enc, ok := h.n.(networkListEncoder); ok {
		data, err := enc.ListJSON(r.Context(), filters)
		if err != nil {
			writeError(w, err)
			return
		}
		gz := h.listGzip
		if len(filters) > 0 {
			gz = nil
		}
		writeListing(w, r, data, gz)
		return
	}
	nets, err := h.n.List(r.Context(), filters)
	finishJSON(w, http.StatusOK, nets, err)
}

func (h networkHandlers) prune(w http.ResponseWriter, r *http.Request) {
	var q networkFilterQuery
	if !queryInto(w, r, &q) {
		return
	}
	reports, err := h.n.Prune(r.Context(), filtersForClient(r, q.Filters))
	finishJSON(w, http.StatusOK, reports, err)
}

func (h networkHandlers) remove(w http.ResponseWriter, r *http.Request) {
	var q forceRemoveQuery
	timeout, ok := timedQueryInto(w, r, &q)
	if !ok {
		return
	}
	name := pathParam(r, "name")
	err := h.n.Remove(r.Context(), name, q.Force, timeout)
	finishJSON(w, http.StatusOK, []core.NetworkRemoveReport{{Name: name}}, err)
}

func (h networkHandlers) update(w http.ResponseWriter, r *http.Request) {
	var opts core.NetworkUpdateOptions
	if err := decodeStrict(r, &opts); err != nil {
		writeError(w, err)
		return
	}
	finishNoContent(w, h.n.Update(r.Context(), pathParam(r, "name"), opts))
}

// networkConnectRequest is Podman's NetworkConnectOptions body.
type networkConnectRequest struct {
	Container string `json:"container"`
	core.PerNetworkOptions
}

func (h networkHandlers) connect(w http.ResponseWriter, r *http.Request) {
	var req networkConnectRequest
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Container == "" {
		writeError(w, core.InvalidArgument("container", errors.New("a container is required")))
		return
	}
	err := h.n.Connect(r.Context(), pathParam(r, "name"), req.Container, req.PerNetworkOptions)
	finishJSON(w, http.StatusOK, "OK", err)
}

// networkDisconnectRequest is Docker's disconnect body, which Podman's
// libpod route takes too.
type networkDisconnectRequest struct {
	Container string `json:"Container"`
	Force     bool   `json:"Force"`
}

func (h networkHandlers) disconnect(w http.ResponseWriter, r *http.Request) {
	var req networkDisconnectRequest
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Container == "" {
		writeError(w, core.InvalidArgument("Container", errors.New("a container is required")))
		return
	}
	err := h.n.Disconnect(r.Context(), pathParam(r, "name"), req.Container, req.Force)
	finishJSON(w, http.StatusOK, "OK", err)
}
