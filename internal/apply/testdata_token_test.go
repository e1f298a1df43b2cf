package apply

import (
	"os"
	"strings"
	"testing"
)

// A position token as the first release wrote it (frozen in testdata: the
// token text, then its checksum, one per line) decodes forever.
func TestFrozenTokenV1(t *testing.T) {
	b, err := os.ReadFile("testdata/token-v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("fixture has %d lines, want the token and its checksum", len(lines))
	}
	tok, err := Decode(lines[0], lines[1])
	if err != nil {
		t.Fatal(err)
	}
	if tok.Stream != "orders" || tok.ChainID != "c1" || tok.LastApplied != "l9" || tok.InProgress == nil ||
		tok.InProgress.Incremental != "l10" || tok.InProgress.AppliedThrough != 50002 || tok.Owner != "run-a/7/1" {
		t.Fatalf("decoded %+v", tok)
	}
}
