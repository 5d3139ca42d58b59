// Package version holds the build's version information, stamped at link time:
//
//	go build -ldflags "-X github.com/gantry-dev/gantry/internal/version.Version=v0.1.0 \
//	  -X github.com/gantry-dev/gantry/internal/version.Commit=abc1234"
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

var (
	// Version is the release, or "dev" for an unstamped build.
	Version = "dev"
	// Commit is the source commit, or "unknown".
	Commit = "unknown"
)

// Info describes this build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this build's Info. An unstamped build falls back to the VCS revision
// the Go toolchain recorded, when there is one.
func Get() Info {
	commit := Commit
	if commit == "unknown" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 7 {
					commit = s.Value[:7]
				}
			}
		}
	}
	return Info{
		Version:   Version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the one-line form `gantry version` prints.
func (i Info) String() string {
	return fmt.Sprintf("gantry %s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}
