package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestPruneUsage(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"backup", "prune", "--target", dir},
		{"backup", "prune", "--target", dir, "--keep-segments", "2", "--keep-duration", "1h"},
		{"backup", "prune", "--target", dir, "--keep-segments", "-1"},
		{"backup", "prune", "--keep-segments", "2"},
		{"backup", "stream", "run", "--source", "postgres://app@db/app", "--target", dir, "--retain-segments", "2"},
		{"backup", "compact", "--target", dir, "--keep-replaced", "-1s"},
		{"backup", "compact"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != errcode.ExitUsage || !strings.Contains(errOut, "SLUICE-E-") {
			t.Errorf("%s: exit %d, stderr %s; want exit 2", strings.Join(args, " "), code, errOut)
		}
	}
	// A store without a chain is a refusal, before anything is written.
	code, _, errOut := runCLI(t, "backup", "prune", "--target", dir, "--keep-segments", "2")
	if code != errcode.ExitRefused || !strings.Contains(errOut, string(errcode.ChainNotFound)) {
		t.Errorf("prune of an empty store: exit %d, stderr %s", code, errOut)
	}
}
