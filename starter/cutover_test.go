package main

import (
	"strings"
	"testing"
)

// cutover checks its flags before it reaches Temporal or the store.
func TestCutoverChecksItsFlags(t *testing.T) {
	cleanEnv(t)
	base := []string{"sync", "from-backup", "cutover", "--backup-target", "/tmp/chain", "--target", "postgres://u@h/db"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--stream-id is required"},
		{[]string{"--stream-id", "s", "--sequence-margin", "-1"}, "--sequence-margin -1: give 0 or more"},
		{[]string{"--stream-id", "s", "--wait", "0s"}, "--wait 0s: give 1s or more"},
	} {
		code, _, errOut := runCLI(t, append(base, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, "SLUICE-E-USAGE") || !strings.Contains(errOut, tc.want) {
			t.Errorf("cutover %v: exit %d, stderr %q; want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI(t, "sync", "from-backup", "cutover", "--stream-id", "s", "--target", "postgres://u@h/db"); code != 2 || !strings.Contains(errOut, "--backup-target is required") {
		t.Errorf("cutover without --backup-target: exit %d, %q", code, errOut)
	}
}
