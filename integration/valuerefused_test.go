package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// A value the target will not take (here: a column narrower on the target
// than on the source) stops the broker with a named refusal instead of a
// retry loop; once the operator widens the column, a new run resumes where
// the first stopped and applies every change once.
func TestBrokerRefusesAValueTheTargetWillNotTake(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE notes (id int PRIMARY KEY, v text)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	full := lastIncremental(t, chainURL, nil)
	inc := appendIncremental(t, chainURL, "public.notes", [][]string{{"1", "ok"}, {"2", "far too long for three"}, {"3", "end"}}, true, 99)
	dst := testenv.CreateDB(t, "dst")
	testenv.Exec(t, dst, `CREATE TABLE public.notes (id int PRIMARY KEY, v varchar(3))`)
	stream := fmt.Sprintf("value-%d", time.Now().UnixNano()%1e6)
	run := []string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream, "--poll-interval", "300ms"}

	r := sluice(t, append(run, "--at-chain-id", full)...)
	requireRefusal(t, r, "SLUICE-E-TARGET-VALUE-REFUSED", "public.notes", "22001")
	var n int
	if err := queryInt(t, dst, `SELECT count(*) FROM public.notes`, &n); err != nil || n != 0 {
		t.Fatalf("the refused transaction left %d rows (%v)", n, err)
	}

	testenv.Exec(t, dst, `ALTER TABLE public.notes ALTER COLUMN v TYPE text`)
	mustSluice(t, append(run, "--detach")...)
	waitBrokerAt(t, stream, inc, time.Minute)
	stopBroker(t, chainURL, stream)
	var got string
	if err := queryString(dst, `SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM public.notes`, &got); err != nil {
		t.Fatal(err)
	}
	if got != "1=ok,2=far too long for three,3=end" {
		t.Fatalf("after the fix the broker resumes and applies every change once: %s", got)
	}
}
