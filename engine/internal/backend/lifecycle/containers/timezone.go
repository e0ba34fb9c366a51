package containers

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/berth-project/berth/engine/internal/core"
)

// zoneinfoDir holds the host's time zone files (Debian's tzdata).
const zoneinfoDir = "/usr/share/zoneinfo"

// timezoneFile reads the zone file a container's timezone names: the host's
// own /etc/localtime for "local", else zoneinfoDir/NAME. A name the host has
// no file for, or whose file is not one (TZif), is a 400.
func timezoneFile(tz string) ([]byte, error) {
	path := "/etc/localtime"
	if tz != "local" {
		path = filepath.Join(zoneinfoDir, tz)
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, core.InvalidArgument("timezone", fmt.Errorf("unknown time zone %q: the host has no %s", tz, path))
	case err != nil:
		return nil, core.InvalidArgument("timezone", fmt.Errorf("time zone %q: %w", tz, err))
	case !bytes.HasPrefix(data, []byte("TZif")):
		return nil, core.InvalidArgument("timezone", fmt.Errorf("time zone %q: %s is not a time zone file", tz, path))
	}
	return data, nil
}
