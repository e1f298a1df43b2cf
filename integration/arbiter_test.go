package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The broker's inserts arbitrate on the key its judgment judged on the live
// target. Here the chain's table is keyed by id, while the operator's copy on
// the target is keyed only by a NOT NULL UNIQUE email: the judgment accepts
// that key, and the inserts must use it (ON CONFLICT (id) would fail every
// insert with 42P10 and retry forever).
func TestBrokerArbitratesOnTheTargetsKey(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE people (id int PRIMARY KEY, email text NOT NULL, v text)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	full := lastIncremental(t, chainURL, nil)
	inc := appendIncremental(t, chainURL, "public.people", [][]string{{"1", "a@x", "one"}, {"2", "b@x", "two"}}, true, 99)
	dst := testenv.CreateDB(t, "dst")
	testenv.Exec(t, dst, `CREATE TABLE public.people (id int, email text NOT NULL UNIQUE, v text);
		INSERT INTO public.people VALUES (1, 'a@x', 'already there')`)
	stream := fmt.Sprintf("arbiter-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--at-chain-id", full, "--poll-interval", "300ms", "--detach")
	waitBrokerAt(t, stream, inc, time.Minute)
	stopBroker(t, chainURL, stream)
	var got string
	if err := queryString(dst, `SELECT string_agg(id || '|' || email || '|' || v, ',' ORDER BY id) FROM public.people`, &got); err != nil {
		t.Fatal(err)
	}
	if got != "1|a@x|one,2|b@x|two" {
		t.Fatalf("the insert that met the existing email upserts it, the other inserts: %s", got)
	}
	if strings.Contains(h.workerLog.String(), "42P10") {
		t.Fatal("an insert named an arbiter the target has no unique index for")
	}
}
