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
	b.WriteString("\n## Codes of earlier releases\n\n")
	b.WriteString("Earlier releases raised these codes, named after one engine's objects; each is now another\n")
	b.WriteString("name of the concept code every source raises. Where the engine that raised the old code\n")
	b.WriteString("raises the new one, the error line shows both (`SLUICE-E-SOURCE-LOG-LOST (formerly\n")
	b.WriteString("SLUICE-E-SLOT-INVALIDATED): …`), so a script matching the old code keeps working; the\n")
	b.WriteString("`code` label of `sluice_refusals_total` and the Temporal failure type carry the new code.\n\n")
	b.WriteString("| earlier code | now | exit |\n|---|---|---|\n")
	for _, a := range Aliases() {
		spec, _ := Lookup(a.Concept)
		fmt.Fprintf(&b, "| `%s` | `%s` | %d |\n", a.Old, a.Concept, spec.Exit)
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

// An alias is another name of its concept code: Is finds an error by
// either, Lookup and the exit status are the concept's, and an error an
// engine raises under the concept code prints the earlier code beside it.
func TestAliases(t *testing.T) {
	if len(Aliases()) == 0 {
		t.Fatal("no aliases registered")
	}
	for _, a := range Aliases() {
		spec, ok := Lookup(a.Old)
		if !ok || spec.Code != a.Concept {
			t.Errorf("Lookup(%s) = %+v, %v; want the spec of %s", a.Old, spec, ok, a.Concept)
		}
		if _, isCode := registry[a.Old]; isCode {
			t.Errorf("%s is both a code and an alias", a.Old)
		}
	}
	err := fmt.Errorf("window: %w", New(SourceLogLost, "slot s is gone").Was(SlotInvalidated))
	for _, c := range []Code{SourceLogLost, SlotInvalidated} {
		if !Is(err, c) {
			t.Errorf("Is(%v, %s) = false", err, c)
		}
	}
	if Is(err, SlotMissing) || Is(err, SourceAnchorMissing) {
		t.Errorf("Is(%v) matched another concept", err)
	}
	if !Is(New(SlotInvalidated, "from an older worker"), SourceLogLost) {
		t.Error("an error under the earlier code is not found by the concept code")
	}
	if got, want := err.Error(), "window: SLUICE-E-SOURCE-LOG-LOST (formerly SLUICE-E-SLOT-INVALIDATED): slot s is gone"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := ExitStatus(New(SlotInUse, "x")); got != ExitRefused {
		t.Errorf("an alias's exit status %d, want %d", got, ExitRefused)
	}
}
