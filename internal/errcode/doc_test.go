package errcode

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/error-codes.md from the registry")

const docPath = "../../docs/error-codes.md"

// renderDoc renders the error-code reference from the registry, so the
// document can never disagree with the code.
func renderDoc() string {
	var b strings.Builder
	b.WriteString("# Error codes\n\n")
	b.WriteString("Every refusal and failure sluice reports carries a stable `SLUICE-E-…` code, printed first on\n")
	b.WriteString("the error line, followed by a `hint:` line saying what to do. The exit status of the `sluice`\n")
	b.WriteString("command follows from the code:\n\n")
	b.WriteString("| exit | meaning |\n|---|---|\n")
	b.WriteString("| 0 | done, or stopped on request |\n")
	b.WriteString("| 1 | runtime failure or partial work; running again is safe |\n")
	b.WriteString("| 2 | bad usage or configuration; fix the command or the environment |\n")
	b.WriteString("| 3 | a named refusal: sluice declined to do something unsafe; see the remedy |\n\n")
	b.WriteString("Inside Temporal a coded failure is an application error whose type is the code; refusals\n")
	b.WriteString("(exit 2 and 3) are non-retryable, runtime codes (exit 1) are retried by the activity's retry\n")
	b.WriteString("policy before they surface.\n\n")
	b.WriteString("This file is generated from `internal/errcode/codes.go` by\n")
	b.WriteString("`go test ./internal/errcode -run TestErrorCodesDoc -update`; a test fails when they disagree.\n\n")
	b.WriteString("| code | exit | meaning | what to do |\n|---|---|---|---|\n")
	for _, s := range All() {
		fmt.Fprintf(&b, "| `%s` | %d | %s | %s |\n", s.Code, s.Exit, escape(s.Meaning), escape(s.Hint))
	}
	return b.String()
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func TestErrorCodesDoc(t *testing.T) {
	want := renderDoc()
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is out of date: run go test ./internal/errcode -run TestErrorCodesDoc -update", docPath)
	}
}

func TestEveryCodeIsComplete(t *testing.T) {
	for _, s := range All() {
		if !strings.HasPrefix(string(s.Code), "SLUICE-E-") || s.Meaning == "" || s.Hint == "" {
			t.Errorf("%s: every code needs the SLUICE-E- prefix, a meaning and a hint", s.Code)
		}
		if s.Exit < 1 || s.Exit > 3 {
			t.Errorf("%s: exit %d is not a failure status", s.Code, s.Exit)
		}
	}
}

func TestExitStatus(t *testing.T) {
	if ExitStatus(nil) != 0 {
		t.Error("nil error must exit 0")
	}
	if got := ExitStatus(fmt.Errorf("wrapped: %w", New(ChunkCorrupt, "x"))); got != ExitRefused {
		t.Errorf("wrapped refusal: exit %d", got)
	}
	if got := ExitStatus(New(Usage, "x")); got != ExitUsage {
		t.Errorf("usage: exit %d", got)
	}
	if got := ExitStatus(fmt.Errorf("plain")); got != ExitRuntime {
		t.Errorf("uncoded: exit %d", got)
	}
	inner := New(StoreUnreachable, "inner")
	outer := Wrap(ChainInvalid, inner, "outer")
	if !Is(outer, StoreUnreachable) || !Is(outer, ChainInvalid) || Is(outer, Usage) {
		t.Error("Is must see every code in the chain")
	}
}
