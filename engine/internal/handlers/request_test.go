package handlers

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

func TestDecodeValues(t *testing.T) {
	type params struct {
		All     bool                `query:"all"`
		Name    string              `query:"name"`
		Limit   int                 `query:"limit"`
		Size    uint64              `query:"size"`
		Images  []string            `query:"images"`
		Filters map[string][]string `query:"filters"`
		Skipped string
	}
	cases := []struct {
		query   string
		want    params
		wantErr string
	}{
		{"", params{Limit: 10}, ""},
		{"all=true&name=x&limit=3&size=7", params{All: true, Name: "x", Limit: 3, Size: 7}, ""},
		{"all=1", params{All: true, Limit: 10}, ""},
		{"all", params{All: true, Limit: 10}, ""},
		{"all=false", params{Limit: 10}, ""},
		{"images=a&images=b", params{Images: []string{"a", "b"}, Limit: 10}, ""},
		{`filters={"label":["a=b","c"],"dangling":["true"]}`, params{Limit: 10, Filters: map[string][]string{"label": {"a=b", "c"}, "dangling": {"true"}}}, ""},
		{`filters={"label":{"a=b":true,"c":false}}`, params{Limit: 10, Filters: map[string][]string{"label": {"a=b"}}}, ""},
		{"filters=", params{Limit: 10, Filters: map[string][]string{}}, ""},
		{"all=maybe", params{}, "all"},
		{"limit=x", params{}, "limit"},
		{"size=-1", params{}, "size"},
		{"filters=[1]", params{}, "filters"},
		{`filters={"a":"b"}`, params{}, "filters"},
		{"Skipped=x", params{Limit: 10}, ""},
		// Names match whatever their case, as Podman's server matches them:
		// its clients send options under lowercased field names. An exact
		// match wins.
		{"ALL=true&Name=y", params{All: true, Name: "y", Limit: 10}, ""},
		{"name=exact&NAME=other", params{Name: "exact", Limit: 10}, ""},
		{"LIMIT=x", params{}, "limit"},
	}
	for _, c := range cases {
		values, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		got := params{Limit: 10}
		err = decodeValues(values, &got)
		if c.wantErr != "" {
			var fe *core.FieldError
			if !errors.As(err, &fe) || fe.Field != c.wantErr || !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("%q: error %v, want an invalid %s", c.query, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %+v, want %+v", c.query, got, c.want)
		}
	}
}

func TestStatusOf(t *testing.T) {
	cases := map[error]int{
		core.ErrNoSuchImage:                                 404,
		core.ErrNoSuchContainer:                             404,
		core.ErrNoSuchExecSession:                           404,
		core.ErrNameInUse:                                   409,
		core.ErrStateConflict:                               409,
		core.ErrImageInUse:                                  409,
		core.ErrAmbiguous:                                   409,
		core.InvalidArgument("x", errors.New("bad")):        400,
		core.ErrNotModified:                                 304,
		errors.New("disk on fire"):                          500,
		errors.Join(errors.New("ctx"), core.ErrNoSuchImage): 404,
	}
	for err, want := range cases {
		if got := httpwire.StatusOf(err); got != want {
			t.Errorf("httpwire.StatusOf(%v) = %d, want %d", err, got, want)
		}
	}
}

func FuzzParseFilters(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"label":["a=b"]}`, `{"label":{"a":true}}`, `{"x":null}`, `{"x":[null]}`,
		`[`, `{"reference":["busybox","quay.io/x/y:1"],"dangling":["true"]}`, `{"a":{"b":1}}`, "\x00",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		filters, err := parseFilters(raw)
		if err != nil {
			if filters != nil {
				t.Fatalf("filters %v returned with error %v", filters, err)
			}
			return
		}
		if filters == nil {
			t.Fatal("nil filters without error")
		}
	})
}

func TestFiltersForClient(t *testing.T) {
	filters := map[string][]string{"label": {"a", "b"}, "label!": {"c", "d"}, "reference": {"x", "y"}, "dangling": {"true"}}
	joined := map[string][]string{"label": {"a=b"}, "label!": {"c=d"}, "reference": {"x", "y"}, "dangling": {"true"}}
	cases := map[string]map[string][]string{
		"/v4.3.1/libpod/images/json": joined,
		"/v3.4.0/libpod/images/json": joined,
		"/v5.7.0/libpod/images/json": filters,
		"/libpod/images/json":        filters,
	}
	for path, want := range cases {
		var got map[string][]string
		r := chi.NewRouter()
		handler := func(w http.ResponseWriter, req *http.Request) { got = filtersForClient(req, filters) }
		r.Get("/v{version}/libpod/images/json", handler)
		r.Get("/libpod/images/json", handler)
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

func TestParseRegistryAuth(t *testing.T) {
	cred := core.RegistryCredential{Username: "u", Password: "p"}
	cases := []struct {
		name  string
		value string
		want  *core.RegistryAuth
		err   bool
	}{
		{"absent", "", nil, false},
		{"null", "null", nil, false},
		{"empty object", b64(`{}`), nil, false},
		{"single", b64(`{"username":"u","password":"p"}`), &core.RegistryAuth{Default: &cred}, false},
		{"single std encoding", base64.StdEncoding.EncodeToString([]byte(`{"username":"u","password":"p"}`)), &core.RegistryAuth{Default: &cred}, false},
		{"single auth field", b64(`{"auth":"` + base64.StdEncoding.EncodeToString([]byte("u:p")) + `"}`), &core.RegistryAuth{Default: &cred}, false},
		{"identity token", b64(`{"identitytoken":"tok"}`), &core.RegistryAuth{Default: &core.RegistryCredential{IdentityToken: "tok"}}, false},
		{"per registry", b64(`{"127.0.0.1:5000":{"username":"u","password":"p"}}`),
			&core.RegistryAuth{PerRegistry: map[string]core.RegistryCredential{"127.0.0.1:5000": cred}}, false},
		{"per registry with default", b64(`{"":{"username":"u","password":"p"},"quay.io":{"username":"q","password":"r"}}`),
			&core.RegistryAuth{Default: &cred, PerRegistry: map[string]core.RegistryCredential{"quay.io": {Username: "q", Password: "r"}}}, false},
		{"not base64", "%%%", nil, true},
		{"not json", b64("user:pass"), nil, true},
		{"bad auth field", b64(`{"auth":"!!"}`), nil, true},
		{"auth without colon", b64(`{"auth":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `"}`), nil, true},
		{"array", b64(`[1,2]`), nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRegistryAuth(c.value)
			if (err != nil) != c.err {
				t.Fatalf("error %v, want error %v", err, c.err)
			}
			if !c.err && !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestRegistryAuthHeaderErrorsAreBadRequests(t *testing.T) {
	h := map[string][]string{"X-Registry-Auth": {"%%%"}}
	if _, err := registryAuth(h); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("malformed header: %v, want invalid argument", err)
	}
}

// FuzzParseRegistryAuth: any header value is either refused or decoded into
// credentials; it never panics.
func FuzzParseRegistryAuth(f *testing.F) {
	for _, seed := range []string{"", "null", b64(`{}`), b64(`{"username":"u","password":"p"}`),
		b64(`{"r":{"auth":"dTpw"}}`), b64(`{"auth":"dTpw"}`), "%%%", b64(`[`), b64(`{"":{}}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		auth, err := ParseRegistryAuth(value)
		if err != nil && auth != nil {
			t.Fatalf("both credentials and an error for %q", value)
		}
		if auth != nil && auth.Default == nil && len(auth.PerRegistry) == 0 {
			t.Fatalf("empty credentials returned for %q", value)
		}
	})
}

func TestParseInputTime(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		in    string
		since bool
		want  time.Time
		bad   bool
	}{
		{in: "2024-01-02T03:04:05Z", want: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
		{in: "2024-01-02T03:04:05.5+01:00", want: time.Date(2024, 1, 2, 2, 4, 5, 5e8, time.UTC)},
		{in: "2024-01-02T03:04:05", want: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
		{in: "2024-01-02", want: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)},
		{in: "1700000000", want: time.Unix(1700000000, 0)},
		{in: "1700000000.25", want: time.Unix(1700000000, 25e7)},
		{in: "10m", since: true, want: now.Add(-10 * time.Minute)},
		{in: "10m", since: false, want: now.Add(10 * time.Minute)},
		{in: "yesterday", bad: true},
		{in: "", bad: true},
		{in: "NaN", bad: true},
		{in: "1e300", bad: true},
	}
	for _, tt := range tests {
		got, err := parseInputTime(tt.in, tt.since, now)
		if tt.bad {
			if err == nil {
				t.Errorf("parseInputTime(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseInputTime(%q, %v) = %v, %v; want %v", tt.in, tt.since, got, err, tt.want)
		}
	}
}

func FuzzParseInputTime(f *testing.F) {
	for _, s := range []string{"2024-01-02T03:04:05Z", "1700000000.5", "-5s", "2024-01-02Z07:00", "1e11"} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseInputTime(s, true, now)
		if err != nil {
			return
		}
		// Only durations depend on the direction; absolute forms do not.
		other, err := parseInputTime(s, false, now)
		if err != nil {
			t.Fatalf("%q parsed for since but not for until: %v", s, err)
		}
		if _, derr := time.ParseDuration(s); derr != nil && !other.Equal(got) {
			t.Fatalf("%q: since %v, until %v", s, got, other)
		}
		if d, derr := time.ParseDuration(s); derr == nil && !got.Equal(other) && !got.Equal(now.Add(-d)) {
			t.Fatalf("%q: duration counted wrongly: %v", s, got)
		}
	})
}
