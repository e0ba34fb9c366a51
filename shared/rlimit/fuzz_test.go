package rlimit

import (
	"errors"
	"testing"
)

// FuzzRlimitUnmarshal feeds arbitrary bytes to the decoder: it must never
// panic, every failure must wrap ErrInvalid, and whatever it accepts must
// survive a Marshal/Unmarshal round trip unchanged.
func FuzzRlimitUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"type":"nofile","hard":-1,"soft":-1}`,
		`{"type":"nofile","hard":18446744073709551615,"soft":0}`,
		`{"type":"nproc","hard":9223372036854775808,"soft":-9223372036854775809}`,
		`{"type":"core","hard":1.5,"soft":"1"}`,
		`{"hard":18446744073709551616}`,
		`{"type":null,"hard":null}`,
		`[]`,
		`null`,
		`{"type":"a","hard":-0,"soft":01}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got Rlimit
		if err := got.UnmarshalJSON(data); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("UnmarshalJSON(%q) error %v does not wrap ErrInvalid", data, err)
			}
			if got != (Rlimit{}) {
				t.Fatalf("UnmarshalJSON(%q) failed but changed the value to %+v", data, got)
			}
			return
		}
		if again, _ := roundTrip(t, got); again != got {
			t.Fatalf("round trip of %+v gave %+v", got, again)
		}
	})
}
