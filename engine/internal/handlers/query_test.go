package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
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
		if got := statusOf(err); got != want {
			t.Errorf("statusOf(%v) = %d, want %d", err, got, want)
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
