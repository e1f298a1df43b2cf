package telemetry

import "runtime/debug"

// buildVersion may be set at link time:
// -ldflags "-X github.com/sluicehq/sluice/internal/telemetry.buildVersion=v1.2.3".
var buildVersion string

// Version returns the version of the running build: the link-time value when
// set, else the main module's version, else the VCS revision, else "devel".
func Version() string {
	if buildVersion != "" {
		return buildVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			if len(s.Value) > 12 {
				return s.Value[:12]
			}
			return s.Value
		}
	}
	return "devel"
}
