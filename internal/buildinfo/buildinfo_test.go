package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfoCheckout(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/sluicehq/sluice", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "CGO_ENABLED", Value: "1"},
			{Key: "GOOS", Value: "linux"},
			{Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	in := FromBuildInfo(bi)
	if in.Version != "(devel)" || in.Revision != "0123456789abcdef0123456789abcdef01234567" || !in.Modified ||
		in.Time != "2025-01-02T03:04:05Z" || in.Platform != "linux/arm64" || in.CGO != "1" || in.GoVersion != "go1.99.1" {
		t.Fatalf("FromBuildInfo = %+v", in)
	}
	if got, want := in.Short("sluice"), "sluice (devel) (commit 0123456789ab-dirty, go1.99.1)"; got != want {
		t.Fatalf("Short = %q, want %q", got, want)
	}
	var b strings.Builder
	if err := in.Write(&b, "sluice"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"module:      github.com/sluicehq/sluice\n",
		"commit:      0123456789abcdef0123456789abcdef01234567\n",
		"modified:    true\n",
		"commit time: 2025-01-02T03:04:05Z\n",
		"go:          go1.99.1\n",
		"platform:    linux/arm64\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Write lacks %q:\n%s", want, b.String())
		}
	}
}

func TestFromBuildInfoReleaseWithoutVCS(t *testing.T) {
	in := FromBuildInfo(&debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "m", Version: "v1.2.3"}})
	if in.Version != "v1.2.3" || in.Commit() != "unknown" || in.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("FromBuildInfo = %+v, commit %s", in, in.Commit())
	}
	var b strings.Builder
	_ = in.Write(&b, "x")
	if strings.Contains(b.String(), "modified") || strings.Contains(b.String(), "commit:") {
		t.Fatalf("a build without VCS data prints VCS lines:\n%s", b.String())
	}
	if in := FromBuildInfo(&debug.BuildInfo{}); in.Version != "(devel)" {
		t.Fatalf("empty main version = %q, want (devel)", in.Version)
	}
}

func TestReadRunningBinary(t *testing.T) {
	in := Read()
	if in.GoVersion != runtime.Version() {
		t.Fatalf("Read().GoVersion = %q, want %q", in.GoVersion, runtime.Version())
	}
}
