// Package buildinfo describes the running binary from what the Go toolchain
// stamped into it: the main module's version, the VCS commit it was built
// from and the Go release that built it. Both binaries print it for
// `version` and `--version`.
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Info is what a build says about itself. Empty strings are things the
// toolchain did not record (a build outside a VCS checkout, -buildvcs=false).
type Info struct {
	Module    string // main module path
	Version   string // main module version; "(devel)" for a build from a checkout
	Revision  string // vcs.revision: the full commit ID
	Time      string // vcs.time: the commit's time, RFC 3339
	Modified  bool   // vcs.modified: the work tree had uncommitted changes
	GoVersion string // the toolchain that built the binary
	Platform  string // GOOS/GOARCH
	CGO       string // CGO_ENABLED as the build saw it ("0", "1" or empty)
}

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "(unknown)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo extracts Info from a debug.BuildInfo.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{
		Module:    bi.Main.Path,
		Version:   bi.Main.Version,
		GoVersion: bi.GoVersion,
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		case "CGO_ENABLED":
			in.CGO = s.Value
		}
	}
	if goos != "" && goarch != "" {
		in.Platform = goos + "/" + goarch
	}
	return in
}

// Commit returns the revision shortened to 12 characters, with "-dirty"
// when the work tree was modified, or "unknown" when none was recorded.
func (in Info) Commit() string {
	if in.Revision == "" {
		return "unknown"
	}
	c := in.Revision
	if len(c) > 12 {
		c = c[:12]
	}
	if in.Modified {
		c += "-dirty"
	}
	return c
}

// Short is the one-line form: "<program> <version> (<commit>, <go version>)".
func (in Info) Short(program string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", program, in.Version, in.Commit(), in.GoVersion)
}

// Write prints the multi-line form `version` shows: the one-line form, then
// one "key: value" line for each thing the build recorded.
func (in Info) Write(w io.Writer, program string) error {
	_, err := fmt.Fprintf(w, "%s\n", in.Short(program))
	if err != nil {
		return err
	}
	rows := [][2]string{
		{"module", in.Module},
		{"version", in.Version},
		{"commit", in.Revision},
		{"modified", fmt.Sprint(in.Modified)},
		{"commit time", in.Time},
		{"go", in.GoVersion},
		{"platform", in.Platform},
		{"cgo", in.CGO},
	}
	for _, r := range rows {
		if r[1] == "" || (r[0] == "modified" && in.Revision == "") {
			continue
		}
		if _, err := fmt.Fprintf(w, "  %-12s %s\n", r[0]+":", r[1]); err != nil {
			return err
		}
	}
	return nil
}
