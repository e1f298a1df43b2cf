package integration

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// After a whole run — a full with a chain slot, the producer, a broker with
// a reset, a restore, and a failing connection — with a password behind
// every DSN (by environment variable and by file), no password appears in
// the worker's log, the CLI's output and errors, the worker's /metrics and
// /status, or any workflow's history (read both as `temporal workflow show`
// prints it and as raw protobuf, which keeps payload bytes verbatim). The
// chain is encrypted under a passphrase given by reference: neither the
// passphrase nor any data key (raw, hex or base64) appears there either.
func TestPasswordsStayOutOfAFullRun(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	dst := testenv.CreateDB(t, "dst")
	again := testenv.CreateDB(t, "again")
	// The role authenticates with scram-sha-256 on 127.0.0.1 (services.sh).
	testenv.Exec(t, src, passwordRole()+`
		CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT i, 'v' FROM generate_series(1, 50) i;
		GRANT SELECT ON a TO sluice_pw_user;
		CREATE PUBLICATION sluice_all_tables FOR ALL TABLES;`)
	for _, db := range []string{dst, again} {
		testenv.Exec(t, "postgres", `ALTER DATABASE `+db+` OWNER TO sluice_pw_user`)
		testenv.Exec(t, db, `ALTER SCHEMA public OWNER TO sluice_pw_user`)
	}
	t.Cleanup(func() {
		for _, db := range []string{src, dst, again} {
			testenv.Exec(t, "postgres", `ALTER DATABASE `+db+` OWNER TO postgres`)
		}
		testenv.Exec(t, src, `DROP PUBLICATION IF EXISTS sluice_all_tables; DROP OWNED BY sluice_pw_user`)
	})
	as := func(db string) string { return asPasswordUser(testenv.DSN(db)) }
	pwFile := filepath.Join(t.TempDir(), "target-password")
	if err := os.WriteFile(pwFile, []byte(sourcePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srcRef := []string{"--source", as(src), "--source-password-env", sourcePasswordEnv, "--encrypt", "--key-passphrase-env", chainPassphraseEnv}
	keyRef := []string{"--key-passphrase-env", chainPassphraseEnv}

	var out strings.Builder
	run := func(args ...string) result {
		t.Helper()
		r := mustSluice(t, args...)
		out.WriteString(r.stdout + r.stderr)
		return r
	}
	chainURL := fileChain(t)
	stream := fmt.Sprintf("secrets-%d", time.Now().UnixNano()%1e6)
	run(append([]string{"backup", "full", "--target", chainURL, "--chain-slot"}, srcRef...)...)
	run(append([]string{"backup", "stream", "run", "--target", chainURL, "--rollover-window", "1s", "--detach"}, srcRef...)...)
	run(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", as(dst), "--target-password-file", pwFile,
		"--stream-id", stream, "--poll-interval", "500ms", "--reset-target-data", "--yes", "--detach"}, keyRef...)...)
	testenv.Exec(t, src, `INSERT INTO a SELECT i, 'w' FROM generate_series(51, 80) i; UPDATE a SET v = 'u' WHERE id < 10`)
	waitCaughtUp(t, src, time.Minute)
	run("backup", "stream", "status", "--target", chainURL, "--json")
	run("sync", "from-backup", "status", "--stream-id", stream, "--json")
	run("backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), time.Minute)
	stopBroker(t, chainURL, stream)
	requireSameRows(t, src, dst)
	run(append([]string{"restore", "--backup-target", chainURL, "--target", as(again), "--target-password-env", sourcePasswordEnv}, keyRef...)...)
	requireSameRows(t, src, again)

	// A failing connection: its error names the DSN, never the password.
	bad := sluice(t, append([]string{"restore", "--backup-target", chainURL, "--target", as("sluice_it_no_such_db"), "--target-password-env", sourcePasswordEnv}, keyRef...)...)
	if bad.exit == 0 {
		t.Fatalf("a restore into a database that does not exist succeeded: %s", bad)
	}
	out.WriteString(bad.stdout + bad.stderr)

	cl := temporalClient(t)
	defer cl.Close()
	found := map[string]string{
		"CLI output and errors": out.String(),
		"worker log":            h.workerLog.String(),
		"worker /metrics":       adminGet(t, "/metrics"),
		"worker /status":        adminGet(t, "/status"),
	}
	var raw strings.Builder
	for _, id := range []string{"backup-full/" + chainURL, "producer/" + chainURL, "broker/" + stream} {
		shown, err := exec.Command("temporal", "workflow", "show", "--address", h.temporal, "--namespace", h.namespace, "--workflow-id", id, "--output", "json").CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow show %s: %v\n%s", id, err, shown)
		}
		found["temporal workflow show "+id] = string(shown)
		hist, _ := rawHistory(t, cl, id)
		raw.WriteString(hist)
	}
	found["raw histories"] = raw.String()
	if !strings.Contains(raw.String(), sourcePasswordEnv) || !strings.Contains(raw.String(), chainPassphraseEnv) {
		t.Fatal("the histories were not read: they do not even name the password's and the passphrase's variables")
	}
	secrets := map[string]string{"the password": sourcePassword, "the chain passphrase": chainPassphrase}
	for i, k := range dataKeys(t, chainURL) {
		secrets[fmt.Sprintf("data key %d (raw)", i)] = string(k)
		secrets[fmt.Sprintf("data key %d (hex)", i)] = hex.EncodeToString(k)
		secrets[fmt.Sprintf("data key %d (base64)", i)] = base64.StdEncoding.EncodeToString(k)
		secrets[fmt.Sprintf("data key %d (base64url)", i)] = base64.RawURLEncoding.EncodeToString(k)
	}
	for where, text := range found {
		for what, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("%s appears in the %s", what, where)
			}
		}
	}
}
