// Package buildinfo is what a Berth binary knows about its own build: the
// version and commit (set by the Makefile's build with -ldflags "-X"; a plain
// go build falls back to what the Go toolchain recorded) and the Go version.
// Both services print it for --version, report it through their APIs and
// export it as the berth_build_info metric.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set at link time: -X github.com/berth-project/berth/shared/buildinfo.version=...
var (
	version string
	commit  string
)

// Info describes one build.
type Info struct {
	Version   string
	Commit    string
	GoVersion string
}

// Get returns this binary's build information. Without link-time values the
// version is the main module's (or "dev" for a local build) and the commit
// the VCS revision Go recorded (or "unknown", e.g. with -buildvcs=false).
func Get() Info {
	info := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if info.Version == "" {
		info.Version = "dev"
		if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
	}
	if info.Commit == "" {
		info.Commit = "unknown"
		if ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && s.Value != "" {
					info.Commit = s.Value
				}
			}
		}
	}
	return info
}

// String is the --version line: "NAME VERSION (commit COMMIT, GOVERSION)".
func (i Info) String(name string) string {
	return name + " " + i.Version + " (commit " + i.Commit + ", " + i.GoVersion + ")"
}
