package mysql

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// An XA transaction's prepared rows are delivered at its XA COMMIT, under
// the commit's GTID, and never when it is rolled back; one-phase XA is an
// ordinary transaction.
func TestXATransactions(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	m := f.full(source.FullOptions{})
	conn, err := testenv.MySQL(t, f.db).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	run := func(stmts ...string) {
		for _, s := range stmts {
			if _, err := conn.ExecContext(context.Background(), s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	run("XA START 'x1'", "INSERT INTO t VALUES (1)", "XA END 'x1'", "XA PREPARE 'x1'")
	f.exec("INSERT INTO t VALUES (2)")
	run("XA COMMIT 'x1'")
	run("XA START 'x2'", "INSERT INTO t VALUES (3)", "XA END 'x2'", "XA PREPARE 'x2'", "XA ROLLBACK 'x2'")
	run("XA START 'x3'", "INSERT INTO t VALUES (4)", "XA END 'x3'", "XA COMMIT 'x3' ONE PHASE")
	changes, win, all := f.capture(m.EndPosition, m.Schema)
	tb := "I " + f.db + ".t "
	want := []string{tb + "2", tb + "1", tb + "4"}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
	if win.Transactions != 3 {
		t.Fatalf("window %+v", win)
	}
	// Each delivered transaction is whole: Begin, its rows, Commit, under one GTID.
	var open string
	for _, c := range all {
		switch c.Op {
		case chain.OpBegin:
			if open != "" {
				t.Fatalf("Begin inside %s", open)
			}
			open = c.Tx
		case chain.OpCommit:
			if c.Tx != open {
				t.Fatalf("Commit of %s closes %s", c.Tx, open)
			}
			open = ""
		default:
			if c.Tx != open {
				t.Fatalf("change of %s inside %s", c.Tx, open)
			}
		}
	}
}
