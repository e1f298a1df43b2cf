package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestSequencesFollowTheSource: a PostgreSQL source with a serial and an
// identity column, a stream and a broker into PostgreSQL. After inserts on
// the source, the target's sequences are at or past the source's, and once
// the broker stops an insert on the target takes the next key without
// colliding (before sequences travelled: the source at 3000, the target at
// 1). A restore of the same chain is raised the same way.
func TestSequencesFollowTheSource(t *testing.T) {
	src, dst, chainURL, stream := startSequenceStream(t, "seq")

	// Two windows' worth: the second moves only the serial.
	testenv.Exec(t, src, `INSERT INTO s (v) SELECT 'x' FROM generate_series(2, 1500);
		INSERT INTO i (v) SELECT 'y' FROM generate_series(2, 700);`)
	waitCaughtUp(t, src, 2*time.Minute)
	testenv.Exec(t, src, `INSERT INTO s (v) SELECT 'z' FROM generate_series(1501, 3000);`)
	waitCaughtUp(t, src, 2*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 2*time.Minute)

	for _, seq := range []string{"s_id_seq", "i_id_seq"} {
		if s, d := lastValue(t, src, seq), lastValue(t, dst, seq); d < s {
			t.Errorf("%s: the broker's target is at %d, the source at %d", seq, d, s)
		}
	}
	stopBroker(t, chainURL, stream)

	// Cutover: the application writes to the target.
	insert := func(db string) (s, i int) {
		t.Helper()
		if err := queryInt(t, db, `INSERT INTO s (v) VALUES ('after cutover') RETURNING id`, &s); err != nil {
			t.Fatalf("insert into s on %s: %v", db, err)
		}
		if err := queryInt(t, db, `INSERT INTO i (v) VALUES ('after cutover') RETURNING id`, &i); err != nil {
			t.Fatalf("insert into i on %s: %v", db, err)
		}
		return s, i
	}
	if s, i := insert(dst); s <= 3000 || i <= 700 {
		t.Errorf("the broker's target handed out s.id %d and i.id %d; want past 3000 and 700", s, i)
	}

	// A restore applies the chain's incrementals and raises the same way.
	restored := testenv.CreateDB(t, "seqrst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(restored))
	if s, i := insert(restored); s <= 3000 || i <= 700 {
		t.Errorf("the restored target handed out s.id %d and i.id %d; want past 3000 and 700", s, i)
	}
}

// startSequenceStream makes a PostgreSQL source (prefix names its
// databases) with a serial and an identity column, a chain with a running
// producer, and a broker started cold into a fresh PostgreSQL target.
func startSequenceStream(t *testing.T, prefix string) (src, dst, chainURL, stream string) {
	t.Helper()
	return startStreamOf(t, prefix, `CREATE TABLE s (id serial PRIMARY KEY, v text);
		CREATE TABLE i (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
		INSERT INTO s (v) VALUES ('first'); INSERT INTO i (v) VALUES ('first');`)
}

// startStreamOf makes a PostgreSQL source (prefix names its databases)
// holding schema, a chain with a running producer, and a broker started
// cold into a fresh PostgreSQL target with brokerArgs added to its flags.
func startStreamOf(t *testing.T, prefix, schema string, brokerArgs ...string) (src, dst, chainURL, stream string) {
	t.Helper()
	src = testenv.CreateDB(t, prefix+"src")
	testenv.Exec(t, src, schema)
	chainURL = fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--detach")
	dst = testenv.CreateDB(t, prefix+"dst")
	stream = fmt.Sprintf("%s-%d", strings.ToLower(t.Name()), time.Now().UnixNano()%1e6)
	mustSluice(t, append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "300ms", "--reset-target-data", "--yes", "--detach"}, brokerArgs...)...)
	return src, dst, chainURL, stream
}

// lastValue returns the last value of sequence public.seq in db (0 before
// its first).
func lastValue(t *testing.T, db, seq string) int64 {
	t.Helper()
	var v int
	if err := queryInt(t, db, fmt.Sprintf(`SELECT coalesce(last_value, 0)::int FROM pg_sequences WHERE schemaname = 'public' AND sequencename = '%s'`, seq), &v); err != nil {
		t.Fatalf("%s of %s: %v", seq, db, err)
	}
	return int64(v)
}
