package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

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
		if !ok || len(given) == 0 {
			continue
		}
		if err := setField(v.Field(i), given); err != nil {
			return core.InvalidArgument(name, err)
		}
	}
	return nil
}

// decodeQueryFold is decodeQuery for parameters Podman's bindings send
// lowercased (usename, notrunc): names match without case, so the tags of
// dst must be lowercase.
func decodeQueryFold(r *http.Request, dst any) error {
	lowered := url.Values{}
	for k, v := range r.URL.Query() {
		lowered[strings.ToLower(k)] = append(lowered[strings.ToLower(k)], v...)
	}
	return decodeValues(lowered, dst)
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
