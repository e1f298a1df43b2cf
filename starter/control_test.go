package main

import (
	"strings"
	"testing"
)

// tune checks its values as run checks the same flags, with the same
// messages and exit status, before it reaches Temporal.
func TestTuneChecksLikeRun(t *testing.T) {
	cleanEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--apply-concurrency", "65"}, "--apply-concurrency 65: give 1 to 64"},
		{[]string{"--apply-concurrency", "0"}, "--apply-concurrency 0: give 1 to 64"},
		{[]string{"--poll-interval", "50ms"}, "--poll-interval 50ms: give 100ms to 1h"},
		{[]string{"--poll-interval", "2h"}, "--poll-interval 2h0m0s: give 100ms to 1h"},
		{nil, "give --apply-concurrency, --poll-interval or both"},
	} {
		code, _, errOut := runCLI(t, append([]string{"sync", "from-backup", "tune", "--stream-id", "s"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, "SLUICE-E-USAGE") || !strings.Contains(errOut, tc.want) {
			t.Errorf("tune %v: exit %d, stderr %q; want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
	// run refuses the same values with the same words.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--apply-concurrency", "65"}, "--apply-concurrency 65: give 1 to 64"},
		{[]string{"--poll-interval", "50ms"}, "--poll-interval 50ms: give 100ms to 1h"},
		{[]string{"--target-driver", "sqlite", "--target", "/tmp/x.db", "--apply-concurrency", "4"}, "--apply-concurrency 4: --target-driver sqlite takes one writer at a time; give --apply-concurrency 1"},
	} {
		args := append([]string{"sync", "from-backup", "run", "--stream-id", "s", "--backup-target", "/tmp/chain", "--target", "postgres://u@h/db"}, tc.args...)
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("run %v: exit %d, stderr %q; want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// pause, resume and tune need a stream ID, as stop and status do.
func TestControlCommandsNeedAStream(t *testing.T) {
	cleanEnv(t)
	for _, cmd := range []string{"pause", "resume", "tune"} {
		code, _, errOut := runCLI(t, "sync", "from-backup", cmd)
		if code != 2 || !strings.Contains(errOut, "--stream-id is required") {
			t.Errorf("%s without --stream-id: exit %d, %q", cmd, code, errOut)
		}
	}
	for _, cmd := range []string{"pause", "resume"} {
		code, _, errOut := runCLI(t, "backup", "stream", cmd)
		if code != 2 {
			t.Errorf("stream %s without --target: exit %d, %q", cmd, code, errOut)
		}
	}
}
