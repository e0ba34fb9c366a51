package core

import (
	"strings"
	"testing"
)

func TestParseDeviceCgroupRule(t *testing.T) {
	tests := []struct {
		in      string
		want    string // FormatDeviceCgroupRule of the result
		wantErr string
	}{
		{in: "c 1:3 rwm", want: "c 1:3 rwm"},
		{in: "b *:* r", want: "b *:* r"},
		{in: "a *:* rwm", want: "a *:* rwm"},
		{in: "  c 10:229   rw ", want: "c 10:229 rw"},
		{in: "c 1:3", wantErr: "is not TYPE MAJOR:MINOR ACCESS"},
		{in: "c 1 rwm", wantErr: `"1" is not MAJOR:MINOR`},
		{in: "c x:3 rwm", wantErr: `"x" is not a number or *`},
		{in: "c 1:3 rwx", wantErr: `access "rwx"`},
		{in: "c 1:3 rr", wantErr: `access "rr"`},
		{in: "d 1:3 r", wantErr: `type "d" is not a, b or c`},
		{in: "c -1:3 r", wantErr: "major number -1 is negative"},
	}
	for _, tc := range tests {
		got, err := ParseDeviceCgroupRule(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseDeviceCgroupRule(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || FormatDeviceCgroupRule(got) != tc.want || !got.Allow {
			t.Errorf("ParseDeviceCgroupRule(%q) = %s, %v; want %s", tc.in, FormatDeviceCgroupRule(got), err, tc.want)
		}
	}
}

func TestIsCDIDevice(t *testing.T) {
	for in, want := range map[string]bool{
		"nvidia.com/gpu=all": true, "example.com/dev=0": true, "bad=name": true,
		"/dev/null": false, "/dev/null:/dev/x:rw": false, "/odd=path": false, "": false,
	} {
		if got := IsCDIDevice(in); got != want {
			t.Errorf("IsCDIDevice(%q) = %v, want %v", in, got, want)
		}
	}
}

// FuzzParseDeviceCgroupRule: any string parses or is refused, never
// panics, and what parses is valid and prints back to an equal rule.
func FuzzParseDeviceCgroupRule(f *testing.F) {
	for _, s := range []string{"c 1:3 rwm", "b *:* r", "a *:* rwm", "c 1:3", "c x:y z", "c 99999999999999999999:1 r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := ParseDeviceCgroupRule(in)
		if err != nil {
			return
		}
		if err := ValidateDeviceCgroupRule(r); err != nil {
			t.Fatalf("%q parsed to an invalid rule: %v", in, err)
		}
		again, err := ParseDeviceCgroupRule(FormatDeviceCgroupRule(r))
		if err != nil || FormatDeviceCgroupRule(again) != FormatDeviceCgroupRule(r) {
			t.Fatalf("%q: %s does not parse back (%v)", in, FormatDeviceCgroupRule(r), err)
		}
	})
}
