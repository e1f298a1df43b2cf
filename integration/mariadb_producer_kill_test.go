package integration

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The MariaDB producer's worker is SIGKILLed again and again (ten times at
// CI's scale, SLUICE_SOAK_SCALE times that in make soak) while a live
// workload (inserts, updates, deletes, a key update, an ADD COLUMN, a new
// table and a large transaction) runs on the source, and the producer
// rotates into a new segment every five links (a trickle of writes after
// the kills goes on until it has). No window is lost or
// written twice: every incremental of the chain holds whole transactions,
// no GTID appears in two incrementals, and a restore of the chain into
// MariaDB equals the source value by value.
func TestMariaDBStreamSurvivesWorkerKills(t *testing.T) {
	srcDSN := newMariaSource(t, "mystreamkill", false)
	chainURL := fileChain(t)
	worker := ownWorker(t, "mariastreamkills")
	q := worker.args
	src := []string{"--source-driver", "mariadb", "--source", srcDSN}
	mustSluice(t, q(append(append([]string{"backup", "full"}, src...), "--target", chainURL)...)...)
	mustSluice(t, q(append(append([]string{"backup", "stream", "run"}, src...), "--target", chainURL,
		"--rollover-window", "1s", "--idle-window", "1s", "--retain-rotate-at-chain-length", "5", "--detach")...)...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wl := &mariaWorkload{dsn: srcDSN, steps: 500 * soakScale(), bigTx: 20_000, pause: 30 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx, t) }()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	kills := 10 * soakScale()
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(500+rng.Intn(1500)) * time.Millisecond)
		worker.kill()
		t.Logf("kill %d at workload step %d: the producer's worker", i+1, wl.progress())
		worker.restart()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// A trickle of writes until the producer has rotated at least once,
	// so the chain audited below spans a segment's seam.
	rotateBy := time.Now().Add(4 * time.Minute)
	for i := 0; segmentsOf(t, chainURL) < 2; i++ {
		if time.Now().After(rotateBy) {
			t.Fatal("the producer did not rotate within four minutes of the last kill")
		}
		mariaExec(t, srcDSN, "INSERT INTO beat (at) VALUES (now(6))")
		time.Sleep(300 * time.Millisecond)
	}
	waitMariaCaughtUp(t, srcDSN, chainURL, 3*time.Minute)
	t.Logf("the producer caught up %s after the last kill", time.Since(killed).Round(100*time.Millisecond))
	mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)

	txs, segments := chainAudit(t, chainURL)
	t.Logf("chain: %d transactions in %d segments", txs, segments)
	dst := testenv.CreateMySQLDB(t, "mystreamkilldst")
	mustSluice(t, q("restore", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(dst))...)
	requireNeutralRowsEqual(t, chainURL, "MariaDB source "+srcDSN, mariaNeutralRows(t, srcDSN),
		fmt.Sprintf("restore of the chain into %s", dst), targetNeutralRows(t, "mysql", testenv.MySQLDSN(dst)))
}
