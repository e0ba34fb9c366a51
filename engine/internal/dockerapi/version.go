package dockerapi

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
)

type versionKey struct{}

// versioned strips a "/v{version}" prefix, refuses versions outside
// [MinAPIVersion, APIVersion] with Docker's 400 message, records the version
// the client speaks (the newest for unversioned paths) and sets the headers
// Docker's answers carry. The route table below sees unversioned paths only.
func versioned(next http.Handler) http.Handler {
	serverHeader := "Berth/" + APIVersion + " (" + runtime.GOOS + ")"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Api-Version", APIVersion)
		h.Set("Ostype", runtime.GOOS)
		h.Set("Server", serverHeader)
		h.Del("Libpod-Api-Version")
		version := APIVersion
		if v, rest, ok := splitVersion(r.URL.Path); ok {
			if compareVersions(v, MinAPIVersion) < 0 {
				writeMessage(w, http.StatusBadRequest, fmt.Sprintf("client version %s is too old. Minimum supported API version is %s, please upgrade your client to a newer version", v, MinAPIVersion))
				return
			}
			if compareVersions(v, APIVersion) > 0 {
				writeMessage(w, http.StatusBadRequest, fmt.Sprintf("client version %s is too new. Maximum supported API version is %s", v, APIVersion))
				return
			}
			version = v
			r.URL.Path = rest
			if r.URL.RawPath != "" {
				if _, raw, ok := splitVersion(r.URL.RawPath); ok {
					r.URL.RawPath = raw
				}
			}
		}
		// A fresh routing context: the engine's root router already tried
		// (and failed) to route this request with its own.
		ctx := context.WithValue(r.Context(), chi.RouteCtxKey, (*chi.Context)(nil))
		ctx = context.WithValue(ctx, versionKey{}, version)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// splitVersion splits "/v1.41/containers/json" into "1.41" and
// "/containers/json"; ok is false for paths without a version prefix.
func splitVersion(path string) (version, rest string, ok bool) {
	if !strings.HasPrefix(path, "/v") {
		return "", "", false
	}
	seg, rest, _ := strings.Cut(path[2:], "/")
	if seg == "" || strings.Trim(seg, "0123456789.") != "" || seg[0] == '.' {
		return "", "", false
	}
	return seg, "/" + rest, true
}

// apiVersion is the version the request's client speaks.
func apiVersion(r *http.Request) string {
	if v, ok := r.Context().Value(versionKey{}).(string); ok {
		return v
	}
	return APIVersion
}

// versionBefore is true when the client speaks a version older than v.
func versionBefore(r *http.Request, v string) bool {
	return compareVersions(apiVersion(r), v) < 0
}

// compareVersions compares dotted numeric versions ("1.24" < "1.4" is
// false: each part is a number).
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	return 0
}
