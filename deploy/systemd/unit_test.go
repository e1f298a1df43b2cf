// Package systemd holds the sluice-worker@.service unit and the test that
// checks it with systemd-analyze verify.
package systemd

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const unit = "sluice-worker@.service"

// TestUnitVerifies runs `systemd-analyze verify` on the unit, with ExecStart
// pointed at a stand-in executable (verify insists the binary exists); any
// message it prints, even a warning it exits 0 on, fails the test.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: deploy/dev/services.sh installs Debian's systemd package")
	}
	src, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	standIn := filepath.Join(dir, "sluice-worker")
	if err := os.WriteFile(standIn, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const exec0 = "ExecStart=/usr/local/bin/sluice-worker"
	if !bytes.Contains(src, []byte("\n"+exec0+"\n")) {
		t.Fatalf("%s does not start %s", unit, exec0)
	}
	src = bytes.Replace(src, []byte(exec0), []byte("ExecStart="+standIn), 1)
	path := filepath.Join(dir, unit)
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=no", path)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0")
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
}

// TestUnitHardening checks the directives the unit must keep.
func TestUnitHardening(t *testing.T) {
	f, err := os.Open(unit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line %q is not KEY=VALUE", line)
		}
		got[section+k] = append(got[section+k], v)
	}
	want := map[string]string{
		"EnvironmentFile":          "/etc/sluice/%i.env",
		"DynamicUser":              "yes",
		"ProtectSystem":            "strict",
		"ProtectHome":              "yes",
		"PrivateTmp":               "yes",
		"NoNewPrivileges":          "yes",
		"CapabilityBoundingSet":    "",
		"AmbientCapabilities":      "",
		"RestrictAddressFamilies":  "AF_INET AF_INET6 AF_UNIX",
		"SystemCallFilter":         "@system-service",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2 3",
	}
	for k, v := range want {
		vals := got["[Service]"+k]
		if len(vals) == 0 || vals[0] != v {
			t.Errorf("[Service] %s=%q, want %q", k, vals, v)
		}
	}
	for _, k := range []string{"User", "ReadWritePaths", "StateDirectory", "Environment", "AmbientCapabilities"} {
		if vals := got["[Service]"+k]; len(vals) > 0 && vals[0] != "" {
			t.Errorf("[Service] %s=%q: the unit holds no user, writable path or inline setting (a drop-in adds what a site needs)", k, vals)
		}
	}
}
