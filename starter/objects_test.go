package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

// A malformed --object-definer is refused before anything starts, by
// restore and by the broker's run; a well-formed one passes the checks and
// gets as far as Temporal (none listening here: exit 1).
func TestObjectDefinerFlag(t *testing.T) {
	cleanEnv(t)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	dir := t.TempDir()
	restore := []string{"restore", "--backup-target", dir, "--target-driver", "mysql", "--target", "mysql://app@db:3306/app"}
	run := []string{"sync", "from-backup", "run", "--backup-target", dir, "--target-driver", "mysql", "--target", "mysql://app@db:3306/app", "--stream-id", "s"}
	for _, bad := range []string{"@localhost", "app@", "''@'%'", "@"} {
		for _, base := range [][]string{restore, run} {
			args := append(append([]string{}, base...), "--object-definer", bad)
			code, _, errOut := runCLI(t, args...)
			if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.Usage)) || !strings.Contains(errOut, "--object-definer") {
				t.Errorf("%s: exit %d, stderr %s; want exit 2 with %s naming --object-definer", strings.Join(args, " "), code, errOut, errcode.Usage)
			}
		}
	}
	for _, good := range []string{"CURRENT_USER", "current_user()", "app@%", "'app'@'10.0.0.%'", "`ops`@localhost", "auditor_role"} {
		args := append(append([]string{}, restore...), "--object-definer", good)
		code, _, errOut := runCLI(t, args...)
		if code != errcode.ExitRuntime || !strings.Contains(errOut, string(errcode.TemporalUnreachable)) {
			t.Errorf("%s: exit %d, stderr %s; want it past the checks (exit 1, %s)", strings.Join(args, " "), code, errOut, errcode.TemporalUnreachable)
		}
	}
}
