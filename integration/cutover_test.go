package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestCutoverMovesSequencesPastTheSource: a PostgreSQL source with a serial
// and an identity column, a stream and a broker into PostgreSQL, through
// the real CLI. A cutover while the producer runs is refused (exit 3); once
// the producer's stop is asked, `sync from-backup cutover --sequence-margin
// 500` waits for it to end and for the broker to apply the chain's tip,
// stops the broker and moves the target's sequences 500 past the source's:
// the broker workflow has completed, and an insert on the target takes a
// key past the source's largest plus 500. A second cutover moves nothing.
func TestCutoverMovesSequencesPastTheSource(t *testing.T) {
	src, dst, chainURL, stream := startSequenceStream(t, "cut")

	testenv.Exec(t, src, `INSERT INTO s (v) SELECT 'x' FROM generate_series(2, 3000);
		INSERT INTO i (v) SELECT 'y' FROM generate_series(2, 700);`)
	waitCaughtUp(t, src, 2*time.Minute)

	cutover := []string{"sync", "from-backup", "cutover", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--sequence-margin", "500", "--wait", "2m"}
	if r := sluice(t, cutover...); r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-CUTOVER-PRODUCER-RUNNING") {
		t.Fatalf("a cutover while the producer runs: %s; want exit 3 with SLUICE-E-CUTOVER-PRODUCER-RUNNING", r)
	}

	// The application stopped writing; the producer commits what it holds
	// and ends, and the cutover waits for that.
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	r := mustSluice(t, cutover...)
	t.Logf("cutover:\n%s", r)
	for _, want := range []string{"set      public.s_id_seq: ", "→ 3500", "set      public.i_id_seq: ", "→ 1200", "2 set, 0 already past, 0 skipped"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the cutover's output lacks %q:\n%s", want, r.stdout)
		}
	}

	cl := temporalClient(t)
	defer cl.Close()
	for _, id := range []string{"broker/" + stream, "producer/" + chainURL} {
		d, err := cl.DescribeWorkflow(context.Background(), id, "")
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		if st := d.RawResponse.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			t.Errorf("%s is %s after the cutover, want completed", id, st)
		}
	}

	for _, seq := range []string{"s_id_seq", "i_id_seq"} {
		if s, d := lastValue(t, src, seq), lastValue(t, dst, seq); d < s+500 {
			t.Errorf("%s: the target is at %d after the cutover, the source at %d; want at least %d", seq, d, s, s+500)
		}
	}

	// A second cutover finds the broker ended at the tip and moves nothing.
	r = mustSluice(t, cutover...)
	if !strings.Contains(r.stdout, "0 set, 2 already past, 0 skipped") {
		t.Errorf("a second cutover:\n%s\nwant both sequences already past", r)
	}

	// The application writes to the target.
	var s, i int
	if err := queryInt(t, dst, `INSERT INTO s (v) VALUES ('after cutover') RETURNING id`, &s); err != nil {
		t.Fatal(err)
	}
	if err := queryInt(t, dst, `INSERT INTO i (v) VALUES ('after cutover') RETURNING id`, &i); err != nil {
		t.Fatal(err)
	}
	var maxS, maxI int
	if err := queryInt(t, src, `SELECT max(id)::int FROM s`, &maxS); err != nil {
		t.Fatal(err)
	}
	if err := queryInt(t, src, `SELECT max(id)::int FROM i`, &maxI); err != nil {
		t.Fatal(err)
	}
	if s <= maxS+500 || i <= maxI+500 {
		t.Errorf("the target handed out s.id %d and i.id %d after the cutover; want past %d and %d (the source's largest plus 500)", s, i, maxS+500, maxI+500)
	}
}
