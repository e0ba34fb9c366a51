// This file holds the request helpers the handlers share: query decoding
// (plain, case-folded, filters), path parameters, the query types and
// parameters several routes take (stop, kill, resize, time, annotations,
// tlsVerify) and the registry credential headers. JSON bodies are read
// through body.go; answers are written through respond.go.

package handlers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
)

// decodeQuery fills the fields of dst (a pointer to a struct) tagged
// `query:"name"` from r's query string. Fields keep the values dst already
// has (its defaults) unless the parameter is present. Supported field types:
// string, bool, int, int64, uint64, []string (repeated or comma-free values),
// map[string][]string (Podman's JSON-encoded "filters") and map[string]string
// (a JSON object, as Podman's bindings send labels and options).
// A malformed value is an ErrInvalidArgument naming the parameter.
func decodeQuery(r *http.Request, dst any) error {
	return decodeValues(r.URL.Query(), dst)
}

func decodeValues(values url.Values, dst any) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("decodeQuery: %T is not a pointer to a struct", dst)
	}
	v = v.Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		name := field.Tag.Get("query")
		if name == "" || name == "-" {
			continue
		}
		given, ok := values[name]
		if !ok {
			given = foldedValues(values, name)
		}
		if len(given) == 0 {
			continue
		}
		if err := setField(v.Field(i), given); err != nil {
			return core.InvalidArgument(name, err)
		}
	}
	return nil
}

// foldedValues are the values of the parameters whose names equal name but
// for case. Podman's server matches names so (its schema decoder), and its
// clients rely on it: their options go out under lowercased field names
// (tcpclose, nopodprefix) where the server's names are camelCase.
func foldedValues(values url.Values, name string) []string {
	var keys []string
	for k := range values {
		if strings.EqualFold(k, name) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, values[k]...)
	}
	return out
}

// queryNames lists the parameter names of a struct's `query` tags.
func queryNames(v any) []string {
	t := reflect.TypeOf(v)
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if name := t.Field(i).Tag.Get("query"); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// setField parses given into a field of one of decodeQuery's supported types.
func setField(f reflect.Value, given []string) error {
	last := given[len(given)-1]
	switch f.Kind() {
	case reflect.String:
		f.SetString(last)
	case reflect.Bool:
		if last == "" {
			f.SetBool(true)
			return nil
		}
		b, err := strconv.ParseBool(last)
		if err != nil {
			return fmt.Errorf("%q is not a boolean", last)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", last)
		}
		f.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a non-negative integer", last)
		}
		f.SetUint(n)
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return errors.New("unsupported parameter type")
		}
		f.Set(reflect.ValueOf(append([]string(nil), given...)))
	case reflect.Map:
		if f.Type().Elem().Kind() == reflect.String {
			m, err := parseStringMap(last)
			if err != nil {
				return err
			}
			f.Set(reflect.ValueOf(m))
			return nil
		}
		filters, err := parseFilters(last)
		if err != nil {
			return err
		}
		f.Set(reflect.ValueOf(filters))
	default:
		return errors.New("unsupported parameter type")
	}
	return nil
}

// parseFilters decodes Podman's filters parameter: a JSON object mapping a
// filter name to a list of values. Docker's older form, mapping a name to an
// object whose keys are the values ({"label":{"a=b":true}}), is accepted too.
func parseFilters(raw string) (map[string][]string, error) {
	out := map[string][]string{}
	if strings.TrimSpace(raw) == "" {
		return out, nil
	}
	var generic map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &generic); err != nil {
		return nil, fmt.Errorf("filters must be a JSON object of string lists: %w", err)
	}
	for name, value := range generic {
		var list []string
		if err := json.Unmarshal(value, &list); err == nil {
			out[name] = list
			continue
		}
		var set map[string]bool
		if err := json.Unmarshal(value, &set); err == nil {
			for v, on := range set {
				if on {
					list = append(list, v)
				}
			}
			out[name] = list
			continue
		}
		return nil, fmt.Errorf("filter %q must be a list of strings", name)
	}
	return out, nil
}

// parseStringMap decodes a map parameter (labels, driver options) as
// Podman's bindings encode it: a JSON object of strings.
func parseStringMap(raw string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(raw) == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, errors.New("must be a JSON object of strings")
	}
	return out, nil
}

// filtersForClient adapts image filters to the API version in the request
// path. Podman 4 clients split each image --filter at every "=" and send
// the pieces as the values of one key ("label=a=b" arrives as
// {"label":["a","b"]}); Podman 4 servers join them back with "=". Only label
// and label! values hold "=", so under /v4.x (and older) their values are
// joined; every other filter keeps one value per alternative (several
// values of one filter match any of them), as it does on newer and
// unversioned paths. Only the image list and prune need this: the other
// lists' clients send one value per --filter.
func filtersForClient(r *http.Request, filters map[string][]string) map[string][]string {
	if !oldFilterForm(chi.URLParam(r, "version")) {
		return filters
	}
	out := make(map[string][]string, len(filters))
	for key, values := range filters {
		if len(values) > 1 && (key == "label" || key == "label!") {
			out[key] = []string{strings.Join(values, "=")}
			continue
		}
		out[key] = values
	}
	return out
}

// oldFilterForm reports whether an API version in a path is before 5.0.
func oldFilterForm(version string) bool {
	if version == "" {
		return false
	}
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n < 5
}

// queryInto decodes the request's query into q, answering the error and
// reporting false when it does not decode.
func queryInto(w http.ResponseWriter, r *http.Request, q any) bool {
	if err := decodeQuery(r, q); err != nil {
		writeError(w, err)
		return false
	}
	return true
}

// foldedQueryInto is queryInto over the case-folded query (foldQuery):
// the routes whose Podman clients send a parameter under more than one
// spelling of its name.
func foldedQueryInto(w http.ResponseWriter, r *http.Request, q any) bool {
	if err := decodeValues(foldQuery(r), q); err != nil {
		writeError(w, err)
		return false
	}
	return true
}

// unsupported answers the first set option the engine does not offer.
func unsupported(opts map[string]bool) error {
	for name, set := range opts {
		if set {
			return core.InvalidArgument(name, errors.New("is not supported by this engine"))
		}
	}
	return nil
}

type stopQuery struct {
	Ignore        bool   `query:"ignore"`
	Timeout       string `query:"timeout"`
	DockerTimeout string `query:"t"`
}

func (q stopQuery) timeout() (*uint, error) {
	if q.Timeout != "" {
		return optionalUint("timeout", q.Timeout)
	}
	return optionalUint("t", q.DockerTimeout)
}

// splitList is the items of a repeated parameter whose values may each hold
// several, separated by sep (condition=running,exited); blank items go.
func splitList(values []string, sep string) []string {
	var out []string
	for _, v := range values {
		for _, part := range strings.Split(v, sep) {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// filtersQuery is the query of a listing or prune whose one parameter is
// the filters.
type filtersQuery struct {
	Filters map[string][]string `query:"filters"`
}

// filteredHandler answers a listing or prune whose one parameter is the
// filters, read as they come: what list returns for them, as JSON.
func filteredHandler[T any](list func(ctx context.Context, filters map[string][]string) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var q filtersQuery
		if !queryInto(w, r, &q) {
			return
		}
		out, err := list(r.Context(), q.Filters)
		finishJSON(w, http.StatusOK, out, err)
	}
}

// intervalValid answers a streaming interval (seconds, the query parameter
// name) outside 1..3600 as that parameter's error and reports false.
func intervalValid(w http.ResponseWriter, name string, seconds int64) bool {
	if seconds < 1 || seconds > 3600 {
		writeError(w, core.InvalidArgument(name, errors.New("must be between 1 and 3600 seconds")))
		return false
	}
	return true
}

// stopQueryInto decodes a stop or restart query and its timeout, answering
// the error and reporting false when either is bad.
func stopQueryInto(w http.ResponseWriter, r *http.Request) (stopQuery, *uint, bool) {
	var q stopQuery
	timeout, ok := timedQueryInto(w, r, &q)
	return q, timeout, ok
}

// forceRemoveQuery are the parameters of a pod's or network's removal.
type forceRemoveQuery struct {
	Force   bool   `query:"force"`
	Timeout string `query:"timeout"`
}

func (q forceRemoveQuery) timeout() (*uint, error) { return optionalUint("timeout", q.Timeout) }

// timedQuery is a query with a timeout parameter (the stop timeout of a
// stop, restart or forced removal).
type timedQuery interface {
	timeout() (*uint, error)
}

// timedQueryInto decodes r's query into q, a pointer, and reads its
// timeout, answering the error and reporting false when either is bad.
func timedQueryInto(w http.ResponseWriter, r *http.Request, q timedQuery) (*uint, bool) {
	if !queryInto(w, r, q) {
		return nil, false
	}
	timeout, err := q.timeout()
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return timeout, true
}

type killQuery struct {
	Signal string `query:"signal"`
}

// optionalUint parses an optional non-negative integer parameter.
func optionalUint(field, v string) (*uint, error) {
	if v == "" {
		return nil, nil
	}
	var n uint
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != strings.TrimLeft(v, "+") {
		// Podman clients send -1 for "no timeout"; read it as the default.
		if v == "-1" {
			return nil, nil
		}
		return nil, core.InvalidArgument(field, fmt.Errorf("%q is not a non-negative integer", v))
	}
	return &n, nil
}

// resizeQuery are the terminal resize parameters.
type resizeQuery struct {
	Height  uint64 `query:"h"`
	Width   uint64 `query:"w"`
	Running bool   `query:"running"`
}

// decodeResize reads a container's or exec session's terminal resize
// parameters; a dimension must fit a terminal's 16 bits.
func decodeResize(r *http.Request) (resizeQuery, error) {
	var q resizeQuery
	if err := decodeQuery(r, &q); err != nil {
		return q, err
	}
	if q.Height > 0xffff || q.Width > 0xffff {
		return q, core.InvalidArgument("h", errors.New("terminal dimensions must fit in 16 bits"))
	}
	return q, nil
}

// tlsVerifyParam is the tlsverify a client asked for, or nil when it did not
// send the parameter (the registry's configuration decides then).
func tlsVerifyParam(values map[string][]string, given bool) *bool {
	if _, set := values["tlsverify"]; !set {
		return nil
	}
	return &given
}

// foldQuery returns the query parameters with lower-case names: Podman's
// server matches them case-insensitively and its client lower-cases most
// ("alltags", "url") but not all ("tlsVerify").
func foldQuery(r *http.Request) map[string][]string {
	out := map[string][]string{}
	for k, v := range r.URL.Query() {
		key := strings.ToLower(k)
		out[key] = append(out[key], v...)
	}
	return out
}

// registryAuth reads X-Registry-Auth (or X-Registry-Config, the per-registry
// form). An absent, empty or "null" header means no credentials; one that is
// not base64 JSON of either form is an ErrInvalidArgument.
func registryAuth(h http.Header) (*core.RegistryAuth, error) {
	header := "X-Registry-Auth"
	value := h.Get(header)
	if value == "" {
		header = "X-Registry-Config"
		value = h.Get(header)
	}
	auth, err := ParseRegistryAuth(value)
	if err != nil {
		return nil, core.InvalidArgument(header, err)
	}
	return auth, nil
}

// ParseRegistryAuth decodes the value of an X-Registry-Auth header.
func ParseRegistryAuth(value string) (*core.RegistryAuth, error) {
	value = strings.TrimSpace(value)
	if value == "" || value == "null" {
		return nil, nil
	}
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.URLEncoding, base64.StdEncoding, base64.RawURLEncoding, base64.RawStdEncoding} {
		if raw, err = enc.DecodeString(value); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("not base64")
	}
	var multi map[string]dockerAuthConfig
	if err := json.Unmarshal(raw, &multi); err == nil {
		auth := &core.RegistryAuth{PerRegistry: map[string]core.RegistryCredential{}}
		for registry, c := range multi {
			cred, err := c.credential()
			if err != nil {
				return nil, fmt.Errorf("registry %q: %w", registry, err)
			}
			if registry == "" {
				auth.Default = &cred
				continue
			}
			auth.PerRegistry[registry] = cred
		}
		if auth.Default == nil && len(auth.PerRegistry) == 0 {
			return nil, nil
		}
		return auth, nil
	}
	var single dockerAuthConfig
	if err := json.Unmarshal(raw, &single); err != nil {
		return nil, errors.New("not a JSON auth configuration")
	}
	cred, err := single.credential()
	if err != nil {
		return nil, err
	}
	if cred == (core.RegistryCredential{}) {
		return nil, nil
	}
	return &core.RegistryAuth{Default: &cred}, nil
}

// parseAnnotations reads "key=value" strings.
func parseAnnotations(field string, list []string) (map[string]string, error) {
	out := make(map[string]string, len(list))
	for _, a := range list {
		key, value, ok := strings.Cut(a, "=")
		if !ok || key == "" {
			return nil, core.InvalidArgument(field, fmt.Errorf("%q is not key=value", a))
		}
		out[key] = value
	}
	return out, nil
}

// registryQuery reads tlsVerify and X-Registry-Auth.
func registryQuery(r *http.Request) (*bool, *core.RegistryAuth, error) {
	values := foldQuery(r)
	q := struct {
		TLSVerify bool `query:"tlsverify"`
	}{TLSVerify: true}
	if err := decodeValues(values, &q); err != nil {
		return nil, nil, err
	}
	auth, err := registryAuth(r.Header)
	if err != nil {
		return nil, nil, err
	}
	return tlsVerifyParam(values, q.TLSVerify), auth, nil
}

// registryQueryInto is registryQuery for a handler: it answers the error
// itself and reports false when tlsVerify or the credentials are bad.
func registryQueryInto(w http.ResponseWriter, r *http.Request) (*bool, *core.RegistryAuth, bool) {
	tlsVerify, auth, err := registryQuery(r)
	if err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	return tlsVerify, auth, true
}

// parseInputTime reads a time parameter the way Podman does: RFC 3339
// (with or without zone or fraction), a date, Unix seconds with an optional
// fraction, or a Go duration counted back from now (since) or forward
// (until).
func parseInputTime(v string, since bool, now time.Time) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04:05.999999999", "2006-01-02Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(secs) && !math.IsInf(secs, 0) && math.Abs(secs) < 1e12 {
		whole, frac := math.Modf(secs)
		return time.Unix(int64(whole), int64(frac*1e9)).UTC(), nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if since {
			return now.Add(-d), nil
		}
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time, Unix timestamp or duration", v)
}

// dockerAuthConfig is the JSON Docker and Podman clients put, base64
// encoded, in X-Registry-Auth: one credential, or a map of them by registry.
type dockerAuthConfig struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
}

func (c dockerAuthConfig) credential() (core.RegistryCredential, error) {
	cred := core.RegistryCredential{Username: c.Username, Password: c.Password, IdentityToken: c.IdentityToken}
	if c.Auth != "" && cred.Username == "" && cred.Password == "" {
		decoded, err := base64.StdEncoding.DecodeString(c.Auth)
		if err != nil {
			return cred, errors.New("auth is not base64")
		}
		user, pass, ok := strings.Cut(string(decoded), ":")
		if !ok {
			return cred, errors.New("auth is not user:password")
		}
		cred.Username, cred.Password = user, pass
	}
	return cred, nil
}

// pathParam returns a path parameter, unescaped (clients escape slashes in
// image references as %2F).
func pathParam(r *http.Request, key string) string {
	raw := chi.URLParam(r, key)
	if unescaped, err := url.PathUnescape(raw); err == nil {
		return unescaped
	}
	return raw
}
