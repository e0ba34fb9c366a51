package handlers

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// FuzzDecodeModifyBody feeds arbitrary bodies to ManifestModify's decoder:
// it must never panic, and every refusal is an ErrInvalidArgument.
func FuzzDecodeModifyBody(f *testing.F) {
	for _, seed := range []string{
		`{"operation":"update","images":["docker://x/y"],"annotations":{"a":"b"}}`,
		`{"Operation":"update","All":false,"Annotations":{"a":"b"},"Arch":"arm64","Features":["f1"],"Images":["docker://x/y"],"OS":"linux","os_features":null,"os_version":"1","Variant":"v8","Authfile":"","Password":"","Username":"","SkipTLSVerify":null}`,
		`{"operation":"annotate","annotation":["a=b","c"]}`,
		`{"operation":"update","artifact_files":["/x"]}`,
		`{"colour":"red"}`,
		`[`,
		``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		decoded, err := decodeModifyBody(strings.NewReader(body))
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("decodeModifyBody(%q): %v is not an invalid argument", body, err)
			}
			return
		}
		if _, err := decoded.instanceOptions(); err != nil && !errors.Is(err, core.ErrInvalidArgument) {
			t.Fatalf("instanceOptions of %q: %v", body, err)
		}
	})
}
