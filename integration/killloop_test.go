package integration

import (
	"context"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/workflows"
)

// killWhileApplying SIGKILLs the broker's worker again and again while a
// workload (of any source engine: wl only reports its progress) runs, at
// least minKills times and until done reports the workload finished: each
// time it waits a little, kills as soon as the broker is seen inside an
// incremental (or at a random moment a little later; until one kill has
// landed inside an incremental, it waits up to 8 s for one), ends the killed run and starts the broker again with run (a warm
// resume; reset is true when the kill came before the first reset recorded
// a position). It returns how many kills there were and how many landed
// inside an incremental.
func killWhileApplying(t *testing.T, worker *ownedWorker, stream string, wl interface{ progress() int }, done <-chan error, minKills int, run func(reset bool)) (kills, midApply int) {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for finished := false; !finished || kills < minKills; kills++ {
		time.Sleep(time.Duration(500+rng.Intn(1000)) * time.Millisecond)
		wait := time.Duration(500+rng.Intn(1500)) * time.Millisecond
		if midApply == 0 {
			// No kill has landed inside an incremental yet: on a loaded
			// machine the broker's applies are short beside its polls, so
			// wait longer for one rather than kill at a random moment.
			wait = 8 * time.Second
		}
		deadline := time.Now().Add(wait)
		var st workflows.BrokerStatus
		answered := false
		for time.Now().Before(deadline) {
			if now, err := brokerStatus(t, cl, stream); err == nil { // queries need a live worker: ask before the kill
				st, answered = now, true
			}
			if st.Applying != "" {
				midApply++
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		worker.kill()
		t.Logf("kill %d at workload step %d: broker last applied %s, applying %s, %d changes", kills+1, wl.progress(), short(st.LastApplied), short(st.Applying), st.ChangesApplied)
		// The killed run's activity would wait out its heartbeat timeout:
		// end the run and start the broker again, as an operator would;
		// fencing keeps a zombie of the old run out.
		_ = cl.TerminateWorkflow(context.Background(), "broker/"+stream, "", "crash test")
		worker.restart()
		// A broker that recorded no position yet (killed inside its cold
		// start, which takes longer on a loaded machine) starts cold again;
		// any other starts warm.
		run(st.LastApplied == "" && (kills == 0 || answered))
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		if kills > 40 {
			t.Fatal("the workload did not finish")
		}
	}
	t.Logf("%d of %d kills landed inside an incremental", midApply, kills)
	return kills, midApply
}

// stepCounter counts the steps a workload has finished, for the kill loop
// (killWhileApplying reads progress).
type stepCounter struct {
	mu   sync.Mutex
	done int
}

// finished records step as done and waits pause before the next one.
func (c *stepCounter) finished(ctx context.Context, step int, pause time.Duration) error {
	c.mu.Lock()
	c.done = step + 1
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(pause):
		return nil
	}
}

// progress returns how many steps are done.
func (c *stepCounter) progress() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}
