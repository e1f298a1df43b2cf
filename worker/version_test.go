package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestPrintVersion(t *testing.T) {
	var b bytes.Buffer
	if code := printVersion(&b); code != 0 {
		t.Fatalf("printVersion = %d", code)
	}
	if out := b.String(); !strings.HasPrefix(out, "sluice-worker ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("printVersion wrote:\n%s", out)
	}
}

func TestRunRefusesStrayArgument(t *testing.T) {
	if code := run([]string{"serve"}); code != 2 {
		t.Fatalf("run(serve) = %d, want 2", code)
	}
}
