package handlers

import (
	"encoding/base64"
	"errors"
	"reflect"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

func b64(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }

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

func TestSplitChanges(t *testing.T) {
	got := splitChanges([]string{"CMD /bin/true\nENV A=1", "  ", "USER nobody"})
	want := []string{"CMD /bin/true", "ENV A=1", "USER nobody"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
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
