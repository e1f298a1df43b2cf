package postgres

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

const pairsDDL = `CREATE TABLE public.p (id integer PRIMARY KEY, code text UNIQUE, v integer CHECK (v > 0))`

func pairsSchema() *chain.Schema {
	return &chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "p",
		Columns:    []chain.Column{notNull(col("id", "integer")), col("code", "text"), col("v", "integer")},
		PrimaryKey: []string{"id"}, Indexes: []chain.Index{{Name: "p_code_key", Columns: []string{"code"}, Unique: true}}}}}
}

// Several batches go ahead while later ones are built, on a table whose
// changes are prepared statements (a second unique index keeps them in
// order): the statements prepared in a batch still in flight are run by
// the next without being prepared twice, a schema change deallocates
// statements of a batch in flight, and every change lands.
func TestBatchesAheadApplyEveryChange(t *testing.T) {
	conn := targetDB(t, pairsDDL)
	s := pairsSchema()
	a := NewApplier(s)
	const n = 3*aheadChanges + 123
	var changes []chain.Change
	for i := 1; i <= n; i++ {
		id := strconv.Itoa(i)
		changes = append(changes, ins("public.p", tv(id), tv("c"+id), tv("1")))
		if i%3 == 0 {
			changes = append(changes, upd("public.p", 0, nil, row(tv(id), tv("c"+id), tv("2"))))
		}
		if i%5 == 0 {
			changes = append(changes, del("public.p", 'K', row(tv(id), null, null)))
		}
		if i == aheadChanges+10 {
			t2 := s.Tables[0]
			t2.Columns = append(append([]chain.Column{}, t2.Columns...), col("extra", "text"))
			changes = append(changes, chain.Change{Op: chain.OpSchema, Table: "public.p", Schema: &t2})
		}
	}
	// After the schema change, images carry the new column.
	for i := range changes {
		c := &changes[i]
		if c.Op == chain.OpSchema {
			for j := i + 1; j < len(changes); j++ {
				d := &changes[j]
				if d.New != nil {
					d.New = append(d.New, null)
				}
				if d.Old != nil {
					d.Old = append(d.Old, null)
				}
			}
			break
		}
	}
	applyTx(t, conn, a, changes...)
	var want, twos int
	for i := 1; i <= n; i++ {
		if i%5 != 0 {
			want++
			if i%3 == 0 {
				twos++
			}
		}
	}
	wantRows(t, conn, `SELECT count(*), count(*) FILTER (WHERE v = 2), count(extra) FROM public.p`,
		strconv.Itoa(want)+"|"+strconv.Itoa(twos)+"|0")
	if err := a.Release(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
}

// A set statement that fails in a batch sent ahead is found when that
// batch lands, while later changes are applied: the error names the change
// that failed, the applier refuses more work, and after the rollback
// nothing of the transaction stays and the connection still works.
func TestBatchAheadErrorNamesChange(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.c (id integer PRIMARY KEY, v integer CHECK (v > 0))`)
	ctx := context.Background()
	if !replicaRole(ctx, conn) {
		t.Fatal("the test's role may not set session_replication_role")
	}
	a := NewApplier(&chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "c",
		Columns: []chain.Column{notNull(col("id", "integer")), col("v", "integer")}, PrimaryKey: []string{"id"}}}})
	a.HoldBack(true)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const bad = 1234
	var failed error
	applied := 0
	for i := range 3 * aheadChanges {
		c := ins("public.c", tv(strconv.Itoa(i+1)), tv("1"))
		c.XID, c.Ordinal = 99, uint32(i)
		if i == bad {
			c.New[1] = tv("-5")
		}
		if failed = a.Apply(ctx, tx, &c); failed != nil {
			break
		}
		applied++
	}
	if failed == nil {
		failed = a.Flush(ctx, tx)
	}
	if failed == nil || !strings.Contains(failed.Error(), "insert to public.c (xid 99, change 1234)") || !strings.Contains(failed.Error(), "23514") {
		t.Fatalf("err = %v", failed)
	}
	if applied < aheadChanges || applied >= 3*aheadChanges {
		t.Fatalf("the error surfaced after %d changes; want it when the first batch lands, after the next was begun", applied)
	}
	c := ins("public.c", tv("999999"), tv("1"))
	if err := a.Apply(ctx, tx, &c); err == nil {
		t.Fatal("a failed applier accepted more changes")
	}
	if err := a.Release(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(t, conn, `SELECT count(*) FROM public.c`, "0")
}

// A lane closed while a batch is in flight waits for it, rolls back and
// leaves nothing behind.
func TestLaneClosedWithBatchInFlight(t *testing.T) {
	conn := targetDB(t, `CREATE TABLE public.c (id integer PRIMARY KEY, v integer)`)
	ctx := context.Background()
	a := NewApplier(&chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "c",
		Columns: []chain.Column{notNull(col("id", "integer")), col("v", "integer")}, PrimaryKey: []string{"id"}}}})
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range aheadChanges + 10 {
		c := ins("public.c", tv(strconv.Itoa(i+1)), tv("1"))
		if err := a.Apply(ctx, tx, &c); err != nil {
			t.Fatal(err)
		}
	}
	if !a.flight.active {
		t.Fatal("no batch in flight after more than one batch of changes")
	}
	l := &lane{conn: conn, applier: a, tx: tx}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !conn.IsClosed() {
		t.Fatal("the lane left its connection open")
	}
}
