package handlers

import (
	"encoding/base64"
	"reflect"
	"testing"
)

func b64(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }

func TestSplitChanges(t *testing.T) {
	got := splitChanges([]string{"CMD /bin/true\nENV A=1", "  ", "USER nobody"})
	want := []string{"CMD /bin/true", "ENV A=1", "USER nobody"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
