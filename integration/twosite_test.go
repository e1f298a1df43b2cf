package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The two sites of a deployment: each site's worker runs in a Temporal
// namespace and on a task queue of its own, hosts only its roles, and holds
// only its own site's secrets (services.sh creates both namespaces).
const (
	sourceSiteNamespace = "sluice-site-source"
	targetSiteNamespace = "sluice-site-target"
	// targetPasswordEnv is the target site's password reference. The
	// target connects as a trust-authenticated role, so any value would
	// do; what matters is that only the target site's worker can resolve
	// the reference.
	targetPasswordEnv = "SLUICE_IT_TARGET_PW"
)

// sitesConfig writes the deployment's configuration file: a [sites.NAME]
// table per site naming its namespace, task queue and roles, so commands and
// workers say --site NAME and nothing else about where they run.
func sitesConfig(t *testing.T, sourceQueue, targetQueue string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.toml")
	body := fmt.Sprintf(`
[sites.source]
namespace  = %q
task_queue = %q
roles      = "producer"

[sites.target]
namespace  = %q
task_queue = %q
roles      = "broker,restore"
`, sourceSiteNamespace, sourceQueue, targetSiteNamespace, targetQueue)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// siteWorker starts the worker of site (a [sites.NAME] of the file at
// config) on queue, with an environment holding that site's secrets only.
func siteWorker(t *testing.T, config, site, queue string, secrets ...string) *ownedWorker {
	t.Helper()
	var env []string
	for _, kv := range h.env() {
		// The harness's own workers hold every secret; a site holds
		// only the ones it is given.
		if !strings.HasPrefix(kv, sourcePasswordEnv+"=") && !strings.HasPrefix(kv, targetPasswordEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, "SLUICE_CONFIG="+config, "SLUICE_SITE="+site)
	env = append(env, secrets...)
	w := &ownedWorker{t: t, queue: queue, fullEnv: env}
	p, err := startWorkerWithEnv(w.queue, &lockedBuffer{}, env)
	return w.owned(p, err)
}

// The deployment sluice exists for: a producer beside the source and a
// broker beside the target, in two namespaces and on two task queues named
// once per site in the configuration file, each worker with only its own
// roles and secrets, the chain the only link between them. Both sites' workers are SIGKILLed while the source takes
// writes; the target ends equal to the source.
func TestTwoSitesThroughTheStoreOnly(t *testing.T) {
	src := testenv.CreateDB(t, "sitesrc")
	testenv.Exec(t, src, passwordRole()+`
CREATE TABLE marker (step int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL);
INSERT INTO acct SELECT i, 0 FROM generate_series(1, 3) i;
GRANT SELECT ON marker, acct TO sluice_pw_user;
-- FOR ALL TABLES needs a superuser: the source's DBA creates it once.
CREATE PUBLICATION sluice_all_tables FOR ALL TABLES;`)
	t.Cleanup(func() { testenv.Exec(t, src, `DROP OWNED BY sluice_pw_user`) })
	dst := testenv.CreateDB(t, "sitedst")
	chainURL := fileChain(t)
	cfg := sitesConfig(t, h.taskQueue+"-site-source", h.taskQueue+"-site-target")
	source := siteWorker(t, cfg, "source", h.taskQueue+"-site-source", sourcePasswordEnv+"="+sourcePassword)
	target := siteWorker(t, cfg, "target", h.taskQueue+"-site-target", targetPasswordEnv+"=unused-by-trust")
	atSource := func(args ...string) []string { return append([]string{"--config", cfg, "--site", "source"}, args...) }
	atTarget := func(args ...string) []string { return append([]string{"--config", cfg, "--site", "target"}, args...) }
	srcDSN := asPasswordUser(testenv.DSN(src))
	stream := fmt.Sprintf("sites-%d", time.Now().UnixNano()%1e6)

	mustSluice(t, atSource("backup", "full", "--source", srcDSN, "--source-password-env", sourcePasswordEnv,
		"--target", chainURL, "--chain-slot")...)
	mustSluice(t, atSource("backup", "stream", "run", "--source", srcDSN, "--source-password-env", sourcePasswordEnv,
		"--target", chainURL, "--rollover-window", "1s", "--detach")...)
	broker := atTarget("sync", "from-backup", "run", "--backup-target", chainURL,
		"--target", testenv.DSN(dst), "--target-password-env", targetPasswordEnv,
		"--stream-id", stream, "--poll-interval", "300ms", "--reset-target-data", "--yes", "--detach")
	mustSluice(t, broker...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &markerWorkload{db: src, from: 1, to: 120, pause: 80 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx) }()
	// Each site's worker dies twice while the source writes; each comes
	// back as its supervisor would restart it, on its own site.
	for i, w := range []*ownedWorker{source, target, source, target} {
		time.Sleep(time.Duration(1500+500*i) * time.Millisecond)
		w.kill()
		t.Logf("kill %d: %s worker SIGKILLed at workload step %d", i+1, map[*ownedWorker]string{source: "source-site", target: "target-site"}[w], wl.progress())
		w.restart()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitMarkers(t, dst, wl.to, 3*time.Minute)
	requireSameRows(t, src, dst)

	// Each run lives in its own site's namespace, and nowhere else.
	for _, c := range []struct{ id, ns, other string }{
		{"producer/" + chainURL, sourceSiteNamespace, targetSiteNamespace},
		{"broker/" + stream, targetSiteNamespace, sourceSiteNamespace},
	} {
		if !workflowIn(t, c.ns, c.id) || workflowIn(t, c.other, c.id) {
			t.Errorf("workflow %s: want it in namespace %s only", c.id, c.ns)
		}
	}
	for w, roles := range map[*ownedWorker]string{source: "roles=producer", target: "roles=broker,restore"} {
		if !strings.Contains(w.log.String(), roles) {
			t.Errorf("worker %s did not start with %s:\n%s", w.queue, roles, tail(w.log.String(), 2000))
		}
	}

	mustSluice(t, atTarget("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	mustSluice(t, atSource("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEndIn(t, targetSiteNamespace, "broker/"+stream, time.Minute)
	waitWorkflowEndIn(t, sourceSiteNamespace, "producer/"+chainURL, time.Minute)
}

// workflowIn reports whether namespace ns holds workflow id.
func workflowIn(t *testing.T, ns, id string) bool {
	t.Helper()
	cl := temporalClientIn(t, ns)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cl.DescribeWorkflow(ctx, id, "")
	return err == nil
}

// waitWorkflowEndIn waits for workflow id of namespace ns to end well.
func waitWorkflowEndIn(t *testing.T, ns, id string, within time.Duration) {
	t.Helper()
	cl := temporalClientIn(t, ns)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := cl.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		t.Fatalf("workflow %s in namespace %s: %v", id, ns, err)
	}
}
