package main

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommandAndFlag(t *testing.T) {
	// A broken configuration file does not stop `version`.
	t.Setenv("SLUICE_CONFIG", "/nonexistent/sluice.toml")
	var outs []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr strings.Builder
		if code := newCLI(&stdout, &stderr).run(context.Background(), args); code != 0 {
			t.Fatalf("sluice %v exited %d: %s", args, code, stderr.String())
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "go:          "+runtime.Version()+"\n") {
			t.Fatalf("sluice %v printed:\n%s", args, out)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Fatalf("version and --version differ:\n%s\n---\n%s", outs[0], outs[1])
	}
	var stdout, stderr strings.Builder
	if code := newCLI(&stdout, &stderr).run(context.Background(), []string{"version", "extra"}); code != 2 {
		t.Fatalf("sluice version extra exited %d, want 2", code)
	}
}
