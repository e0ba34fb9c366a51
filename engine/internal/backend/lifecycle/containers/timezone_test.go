package containers

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestTimezoneFile: a zone name reads the host's tzdata file, "local" the
// host's /etc/localtime; an unknown name or a file that is not a zone file
// is a 400 naming timezone.
func TestTimezoneFile(t *testing.T) {
	if _, err := os.Stat(zoneinfoDir + "/Europe/Berlin"); err != nil {
		t.Skipf("no tzdata on this host: %v", err)
	}
	data, err := timezoneFile("Europe/Berlin")
	if err != nil || !bytes.HasPrefix(data, []byte("TZif")) || !bytes.Contains(data, []byte("CET")) {
		t.Fatalf("Europe/Berlin: %d bytes, %v", len(data), err)
	}
	if _, err := os.Stat("/etc/localtime"); err == nil {
		if _, err := timezoneFile("local"); err != nil {
			t.Fatalf("local: %v", err)
		}
	}
	for name, want := range map[string]string{"Mars/Olympus": "unknown time zone", "zone.tab": "not a time zone file"} {
		_, err := timezoneFile(name)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != "timezone" || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a 400 naming timezone saying %q", name, err, want)
		}
	}
}
