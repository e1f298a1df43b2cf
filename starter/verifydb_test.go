package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestVerifyUsage(t *testing.T) {
	cleanEnv(t)
	pair := []string{"verify", "--source", "postgres://app@db/app", "--target", "postgres://app@replica/app"}
	for _, extra := range [][]string{
		{"--depth", "rowz"},
		{"--depth", "rows", "--max-rows", "0"},
		{"--depth", "rows", "--max-rows", "1001"},
		{"--depth", "checksum", "--max-rows", "5"},
		{"--wait-broker", "s"},
		{"--backup-target", "/tmp/chain"},
		{"--wait-broker", "s", "--backup-target", "/tmp/chain", "--wait-timeout", "0s"},
		{"--include-table", "["},
		{"--target-driver", "oracle"},
	} {
		code, _, errOut := runCLI(t, append(append([]string{}, pair...), extra...)...)
		if code != errcode.ExitUsage || !strings.Contains(errOut, "SLUICE-E-") {
			t.Errorf("verify %s: exit %d, stderr %s; want exit 2", strings.Join(extra, " "), code, errOut)
		}
	}
	// A literal password never reaches a workflow input.
	code, _, errOut := runCLI(t, "verify", "--source", "postgres://app:secret@db/app", "--target", "postgres://app@replica/app")
	if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.LiteralSecret)) {
		t.Errorf("a literal password: exit %d, stderr %s", code, errOut)
	}
}
