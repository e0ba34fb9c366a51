package rlimit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestUnmarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Rlimit
	}{
		{"podman unlimited", `{"type":"nofile","hard":-1,"soft":-1}`, Rlimit{Type: "nofile", Hard: Unlimited, Soft: Unlimited}},
		{"any negative is unlimited", `{"type":"nproc","hard":-2,"soft":-9223372036854775808}`, Rlimit{Type: "nproc", Hard: Unlimited, Soft: Unlimited}},
		{"negative beyond int64", `{"type":"nproc","hard":-99999999999999999999999,"soft":5}`, Rlimit{Type: "nproc", Hard: Unlimited, Soft: 5}},
		{"zero", `{"type":"core","hard":0,"soft":0}`, Rlimit{Type: "core"}},
		{"negative zero is zero", `{"type":"core","hard":-0,"soft":-0}`, Rlimit{Type: "core"}},
		{"ordinary", `{"type":"nofile","hard":20000,"soft":1024}`, Rlimit{Type: "nofile", Hard: 20000, Soft: 1024}},
		{"max uint64", `{"type":"nofile","hard":18446744073709551615,"soft":18446744073709551615}`, Rlimit{Type: "nofile", Hard: Unlimited, Soft: Unlimited}},
		{"beyond int64", `{"type":"nofile","hard":9223372036854775808,"soft":9223372036854775807}`, Rlimit{Type: "nofile", Hard: 9223372036854775808, Soft: 9223372036854775807}},
		{"missing limits", `{"type":"nofile"}`, Rlimit{Type: "nofile"}},
		{"missing type", `{"hard":3,"soft":2}`, Rlimit{Hard: 3, Soft: 2}},
		{"empty object", `{}`, Rlimit{}},
		{"null limits", `{"type":"nofile","hard":null,"soft":null}`, Rlimit{Type: "nofile"}},
		{"whitespace", " {\n\t\"type\" : \"nofile\" , \"hard\" : -1 , \"soft\" : 7 }\n", Rlimit{Type: "nofile", Hard: Unlimited, Soft: 7}},
		{"unknown member ignored", `{"type":"nofile","hard":1,"soft":1,"extra":[1,2]}`, Rlimit{Type: "nofile", Hard: 1, Soft: 1}},
		{"RLIMIT_ spelling kept", `{"type":"RLIMIT_NOFILE","hard":1,"soft":1}`, Rlimit{Type: "RLIMIT_NOFILE", Hard: 1, Soft: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Rlimit
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("Unmarshal(%s) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestUnmarshalJSONRejects(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantMsg string
	}{
		{"float", `{"type":"nofile","hard":1.5,"soft":1}`, `"hard" must be an integer, got a non-integer number 1.5`},
		{"integral float", `{"type":"nofile","hard":1,"soft":2.0}`, `"soft" must be an integer`},
		{"exponent", `{"type":"nofile","hard":1e3,"soft":1}`, `"hard" must be an integer`},
		{"negative float", `{"type":"nofile","hard":-1.0,"soft":1}`, `"hard" must be an integer`},
		{"string number", `{"type":"nofile","hard":"1024","soft":1}`, `"hard" must be an integer, got a string "1024"`},
		{"string unlimited", `{"type":"nofile","hard":1,"soft":"unlimited"}`, `"soft" must be an integer, got a string`},
		{"boolean", `{"type":"nofile","hard":true,"soft":1}`, `"hard" must be an integer, got a boolean`},
		{"object", `{"type":"nofile","hard":{},"soft":1}`, `"hard" must be an integer, got an object`},
		{"array", `{"type":"nofile","hard":[1],"soft":1}`, `"hard" must be an integer, got an array`},
		{"beyond uint64", `{"type":"nofile","hard":18446744073709551616,"soft":1}`, `"hard" value 18446744073709551616 is larger than the maximum`},
		{"type not string", `{"type":7,"hard":1,"soft":1}`, `"type" must be a string`},
		{"not an object", `[1,2]`, `expected a JSON object, got an array`},
		{"bare number", `-1`, `expected a JSON object`},
		{"string", `"nofile"`, `expected a JSON object, got a string`},
		{"truncated", `{"type":"nofile","hard":1`, `unexpected end of JSON input`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Rlimit
			err := json.Unmarshal([]byte(tt.in), &got)
			if err == nil {
				t.Fatalf("Unmarshal(%s) = %+v, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Unmarshal(%s) error %q, want it to contain %q", tt.in, err, tt.wantMsg)
			}
			if got != (Rlimit{}) {
				t.Fatalf("Unmarshal(%s) left %+v behind, want the zero value", tt.in, got)
			}
		})
	}
}

// TestUnmarshalJSONErrorIsInvalid checks direct calls too (json.Unmarshal
// would catch a syntax error before calling UnmarshalJSON).
func TestUnmarshalJSONErrorIsInvalid(t *testing.T) {
	for _, in := range []string{`{"hard":1.5}`, `{"hard":`, ``, `nul`, `{"type":"a","hard":"x"}`} {
		var got Rlimit
		err := got.UnmarshalJSON([]byte(in))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("UnmarshalJSON(%q) error %v, want one wrapping ErrInvalid", in, err)
		}
	}
}

func TestUnmarshalJSONNullKeepsValue(t *testing.T) {
	got := Rlimit{Type: "nofile", Hard: 5, Soft: 4}
	if err := got.UnmarshalJSON([]byte("null")); err != nil {
		t.Fatal(err)
	}
	if got != (Rlimit{Type: "nofile", Hard: 5, Soft: 4}) {
		t.Fatalf("null changed the value to %+v", got)
	}
}

func TestUnmarshalJSONInContainerSpec(t *testing.T) {
	var spec struct {
		Rlimits []Rlimit `json:"r_limits"`
	}
	in := `{"r_limits":[{"type":"nofile","hard":-1,"soft":1024},{"type":"nproc","hard":4096,"soft":-1}]}`
	if err := json.Unmarshal([]byte(in), &spec); err != nil {
		t.Fatal(err)
	}
	want := []Rlimit{{Type: "nofile", Hard: Unlimited, Soft: 1024}, {Type: "nproc", Hard: 4096, Soft: Unlimited}}
	if len(spec.Rlimits) != len(want) || spec.Rlimits[0] != want[0] || spec.Rlimits[1] != want[1] {
		t.Fatalf("got %+v, want %+v", spec.Rlimits, want)
	}
	bad := `{"r_limits":[{"type":"nofile","hard":-1,"soft":1024},{"type":"nproc","hard":1.5,"soft":-1}]}`
	if err := json.Unmarshal([]byte(bad), &spec); !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v, want one wrapping ErrInvalid", err)
	}
}

func TestMarshalJSON(t *testing.T) {
	tests := []struct {
		in   Rlimit
		want string
	}{
		{Rlimit{Type: "nofile", Hard: Unlimited, Soft: Unlimited}, `{"type":"nofile","hard":18446744073709551615,"soft":18446744073709551615}`},
		{Rlimit{Type: "core"}, `{"type":"core","hard":0,"soft":0}`},
		{Rlimit{Type: "nproc", Hard: 9223372036854775808, Soft: 1}, `{"type":"nproc","hard":9223372036854775808,"soft":1}`},
		{Rlimit{Type: "we\"ird\n", Hard: 2, Soft: 1}, `{"type":"we\"ird\n","hard":2,"soft":1}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.in)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("Marshal(%+v) = %s, want %s", tt.in, got, tt.want)
		}
		// The pointer form must encode the same.
		viaPointer, err := json.Marshal(&tt.in)
		if err != nil || string(viaPointer) != tt.want {
			t.Errorf("Marshal(&%+v) = %s, %v, want %s", tt.in, viaPointer, err, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	values := []Rlimit{
		{},
		{Type: "nofile", Hard: Unlimited, Soft: Unlimited},
		{Type: "nofile", Hard: 20000, Soft: 1024},
		{Type: "stack", Hard: 9223372036854775808, Soft: 9223372036854775807},
		{Type: "ünïcode", Hard: Unlimited - 1, Soft: 1},
	}
	for _, want := range values {
		if got, encoded := roundTrip(t, want); got != want {
			t.Errorf("round trip of %+v gave %+v (via %s)", want, got, encoded)
		}
	}
}

// roundTrip encodes v as JSON and decodes the encoding again.
func roundTrip(t *testing.T, v Rlimit) (again Rlimit, encoded []byte) {
	t.Helper()
	encoded, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%+v): %v", v, err)
	}
	if err := json.Unmarshal(encoded, &again); err != nil {
		t.Fatalf("Unmarshal(%s) of our own encoding: %v", encoded, err)
	}
	return again, encoded
}
