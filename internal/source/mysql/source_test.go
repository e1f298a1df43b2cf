package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// fixture is a fresh MariaDB database and an empty chain in a folder.
type fixture struct {
	t   *testing.T
	db  string
	dsn string
	ch  *chain.Chain
	src source.Source
}

func newFixture(t *testing.T, schema string) *fixture {
	t.Helper()
	db := testenv.CreateMySQLDB(t, "mysrc")
	f := &fixture{t: t, db: db, dsn: testenv.MySQLDSN(db)}
	f.exec(schema)
	store, err := blobstore.Open(context.Background(), "file://"+t.TempDir(), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.ch = chain.Open(store)
	if f.src, err = source.Open(context.Background(), "mariadb", f.dsn, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) exec(stmts string) {
	f.t.Helper()
	pool := testenv.MySQL(f.t, f.db)
	for _, s := range strings.Split(stmts, ";\n") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		if _, err := pool.Exec(s); err != nil {
			f.t.Fatalf("%s: %v", s, err)
		}
	}
}

// full takes the chain's full backup.
func (f *fixture) full(o source.FullOptions) *chain.Manifest {
	f.t.Helper()
	if o.AttemptID == "" {
		o.AttemptID = "a1"
	}
	m, err := f.src.FullBackup(context.Background(), f.ch, o)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// rows reads a full's rows of one table as text, "NULL" for NULL.
func (f *fixture) rows(m *chain.Manifest, table string) []string {
	f.t.Helper()
	var out []string
	for _, td := range m.Tables {
		if td.Table != f.db+"."+table {
			continue
		}
		for _, ref := range td.Chunks {
			_, body, err := f.ch.ReadChunk(context.Background(), ref)
			if err != nil {
				f.t.Fatal(err)
			}
			tb := m.Schema.Table(td.Table)
			it := chain.NewTupleIter(body, len(tb.Columns))
			for it.Next() {
				out = append(out, render(it.Values()))
			}
			if it.Err() != nil {
				f.t.Fatal(it.Err())
			}
		}
	}
	return out
}

func render(vals [][]byte) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		if v == nil {
			parts[i] = "NULL"
		} else {
			parts[i] = string(v)
		}
	}
	return strings.Join(parts, "|")
}

func renderChange(c *chain.Change) string {
	img := func(vals []chain.Value) string {
		b := make([][]byte, len(vals))
		for i, v := range vals {
			if v.Kind == chain.ValueText {
				b[i] = v.Data
			}
		}
		return render(b)
	}
	switch c.Op {
	case chain.OpInsert:
		return fmt.Sprintf("I %s %s", c.Table, img(c.New))
	case chain.OpUpdate:
		return fmt.Sprintf("U %s %s -> %s", c.Table, img(c.Old), img(c.New))
	case chain.OpDelete:
		return fmt.Sprintf("D %s %s", c.Table, img(c.Old))
	case chain.OpTruncate:
		return fmt.Sprintf("T %s", strings.Join(c.Tables, ","))
	case chain.OpSchema:
		cols := make([]string, len(c.Schema.Columns))
		for i, col := range c.Schema.Columns {
			cols[i] = col.Name + " " + col.Type
		}
		return fmt.Sprintf("S %s (%s)", c.Table, strings.Join(cols, ", "))
	}
	return string(c.Op)
}

// capture reads the source's changes from start up to its current position.
func (f *fixture) capture(start string, schema *chain.Schema) ([]string, source.Window, []*chain.Change) {
	f.t.Helper()
	ctx := context.Background()
	m, _ := f.ch.LoadCatalog(ctx)
	capt, err := f.src.OpenCapture(ctx, source.CaptureOptions{Source: m.Source, Start: start, Schema: schema})
	if err != nil {
		f.t.Fatal(err)
	}
	defer capt.Close()
	until, err := capt.CurrentPosition(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	var all []*chain.Change
	win, err := capt.Next(ctx, source.Limits{Until: until, Idle: 3 * time.Second}, func(c *chain.Change) error {
		all = append(all, c.Clone())
		if c.Op != chain.OpBegin && c.Op != chain.OpCommit {
			out = append(out, renderChange(c))
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out, win, all
}

func TestFullAndCaptureOfEveryKind(t *testing.T) {
	f := newFixture(t, `
CREATE TABLE kinds (id int PRIMARY KEY, ti tinyint, tu tinyint unsigned, mi mediumint, bu bigint unsigned, dc decimal(12,3),
  fl float, db double, bt bit(10), ch char(4), vb varbinary(8), bn binary(3), e enum('a','b'), s set('x','y','z'),
  j json, d date, dt datetime(6), ts timestamp(6) NULL, tm time(3), y year, u uuid, i6 inet6, txt text)`+";\n"+`
CREATE TABLE keyless (a int, b varchar(10))`+";\n"+`
INSERT INTO kinds VALUES (1, -128, 255, -8388608, 18446744073709551615, -123456789.125, 3.1415927, 0.1,
  b'1010000001', 'ab', x'00ff', x'01', 'b', 'x,z', '{"k": [1, 2]}', '2155-12-31', '2026-12-02 01:02:03.123456',
  '2026-12-02 01:02:03.654321', '-838:59:59.500', 2155, '123e4567-e89b-12d3-a456-426614174000', '::ffff:10.0.0.1', 'héllo')`+";\n"+`
INSERT INTO kinds (id) VALUES (2)`+";\n"+`
INSERT INTO keyless VALUES (1, 'one'), (1, 'one')`)
	m := f.full(source.FullOptions{})
	if m.Source.Engine != EngineName || !strings.HasPrefix(m.Source.Slot, slotPrefix) {
		t.Fatalf("source %+v", m.Source)
	}
	if _, err := parsePosition(m.EndPosition); err != nil {
		t.Fatal(err)
	}
	want := "1|-128|255|-8388608|18446744073709551615|-123456789.125|3.1415927|0.1|\\x0281|ab|\\x00ff|\\x010000|b|x,z|{\"k\": [1, 2]}|2155-12-31|2026-12-02 01:02:03.123456|2026-12-02 01:02:03.654321+00|"
	got := f.rows(m, "kinds")
	if len(got) != 2 || !strings.HasPrefix(got[0], want) {
		t.Fatalf("full rows of kinds:\n got %q\nwant prefix %q", got, want)
	}
	if got[1] != "2"+strings.Repeat("|NULL", 22) {
		t.Fatalf("row 2 = %q", got[1])
	}
	if k := f.rows(m, "keyless"); len(k) != 2 {
		t.Fatalf("keyless rows %q", k)
	}

	// The same values through the binlog read the same.
	f.exec(`UPDATE kinds SET txt = 'bye' WHERE id = 1` + ";\n" + `DELETE FROM kinds WHERE id = 2`)
	changes, win, _ := f.capture(m.EndPosition, m.Schema)
	if win.Transactions != 2 || len(changes) != 2 {
		t.Fatalf("window %+v changes %q", win, changes)
	}
	wantU := "U " + f.db + ".kinds " + got[0] + " -> " + strings.TrimSuffix(got[0], "héllo") + "bye"
	if changes[0] != wantU {
		t.Fatalf("update:\n got %s\nwant %s", changes[0], wantU)
	}
	if changes[1] != "D "+f.db+".kinds "+got[1] {
		t.Fatalf("delete: %s", changes[1])
	}
}

func TestCaptureFollowsSchemaChangesAndTruncates(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY, v varchar(10))`+";\n"+`INSERT INTO t VALUES (1, 'a')`)
	m := f.full(source.FullOptions{})
	f.exec(`INSERT INTO t VALUES (2, 'b')` + ";\n" +
		`ALTER TABLE t ADD COLUMN n int NOT NULL DEFAULT 7` + ";\n" +
		`INSERT INTO t VALUES (3, 'c', 9)` + ";\n" +
		`CREATE TABLE u (k bigint unsigned PRIMARY KEY)` + ";\n" +
		`INSERT INTO u VALUES (5)` + ";\n" +
		`TRUNCATE TABLE t` + ";\n" +
		`BEGIN` + ";\n" + `INSERT INTO u VALUES (6)` + ";\n" + `SAVEPOINT s` + ";\n" + `INSERT INTO u VALUES (7)` + ";\n" +
		`ROLLBACK TO SAVEPOINT s` + ";\n" + `COMMIT`)
	changes, win, all := f.capture(m.EndPosition, m.Schema)
	t1, u := f.db+".t", f.db+".u"
	want := []string{
		"I " + t1 + " 2|b",
		"S " + t1 + " (id int(11), v varchar(10), n int(11))",
		"I " + t1 + " 3|c|9",
		"S " + u + " (k bigint(20) unsigned)",
		"I " + u + " 5",
		"T " + t1,
		"I " + u + " 6",
	}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
	if win.Schema == nil || len(win.Schema.Tables) != 2 {
		t.Fatalf("window schema %+v", win.Schema)
	}
	// Every change is identified by its transaction's GTID and ordinal, and
	// the window ends where its last transaction does.
	var last *chain.Change
	for _, c := range all {
		if !c.Identified || !strings.HasPrefix(c.Tx, "0-") {
			t.Fatalf("change %+v has no GTID identity", c)
		}
		if c.Op == chain.OpCommit {
			last = c
		}
	}
	end, _ := parsePosition(win.End)
	if last == nil || last.EndLSN != end.lsn() {
		t.Fatalf("window end %s, last commit ends at %s", win.End, formatLSN(last.EndLSN))
	}
}

func TestNoGapNoOverlapAtTheSeam(t *testing.T) {
	f := newFixture(t, `CREATE TABLE keyless (a int, b varchar(10))`)
	pool := testenv.MySQL(t, f.db)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		n := 0
		for ctx.Err() == nil {
			if _, err := pool.Exec("INSERT INTO keyless VALUES (?, 'x')", n); err != nil {
				break
			}
			n++
		}
		done <- n
	}()
	time.Sleep(200 * time.Millisecond)
	m := f.full(source.FullOptions{AfterSnapshot: func(context.Context) error { time.Sleep(300 * time.Millisecond); return nil }})
	time.Sleep(200 * time.Millisecond)
	cancel()
	n := <-done
	seen := map[string]int{}
	for _, r := range f.rows(m, "keyless") {
		seen[r]++
	}
	changes, _, _ := f.capture(m.EndPosition, m.Schema)
	for _, c := range changes {
		seen[strings.TrimPrefix(c, "I "+f.db+".keyless ")]++
	}
	if len(seen) != n {
		t.Fatalf("%d rows inserted, %d distinct rows in full + incremental", n, len(seen))
	}
	for r, k := range seen {
		if k != 1 {
			t.Fatalf("row %s appears %d times across the seam", r, k)
		}
	}
}

func TestPositionsOrder(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"mariadb-bin.000002:400 0-1-5", "mariadb-bin.000010:4", -1},
		{"mariadb-bin.000002:400", "mariadb-bin.000002:400 0-1-9", 0},
		{"mariadb-bin.000003:4", "mariadb-bin.000002:9000", 1},
	} {
		got, ok, err := chain.ComparePositions(EngineName, tc.a, tc.b)
		if err != nil || !ok || got != tc.want {
			t.Errorf("compare %q %q = %d %v %v, want %d", tc.a, tc.b, got, ok, err, tc.want)
		}
	}
	if _, err := parsePosition("nofile"); err == nil {
		t.Error("a position without an offset parsed")
	}
	// Positions of two servers (either side of a failover) do not order.
	if _, ok, err := chain.ComparePositions(EngineName, "mariadb-bin.000002:400 0-1-5", "mariadb-bin.000001:300 0-2-7 @mariadb:db2:3307/2"); ok || err == nil {
		t.Errorf("positions of two servers ordered (ok %v, err %v)", ok, err)
	}
}

// A position read on a server other than the chain's own names it; one of
// the chain's own server reads and writes as it always did.
func TestPositionNamesItsServer(t *testing.T) {
	for _, tc := range []struct {
		text string
		want position
	}{
		{"mariadb-bin.000003:4567", position{file: "mariadb-bin.000003", offset: 4567}},
		{"mariadb-bin.000003:4567 0-1-812", position{file: "mariadb-bin.000003", offset: 4567, gtid: "0-1-812"}},
		{"mariadb-bin.000002:330 0-1-812,1-2-9 @mariadb:db2:3306/2", position{file: "mariadb-bin.000002", offset: 330, gtid: "0-1-812,1-2-9", server: "mariadb:db2:3306/2"}},
		{"binlog.000002:330 @3e11fa47-71ca-11e1-9e33-c80aa9429562", position{file: "binlog.000002", offset: 330, server: "3e11fa47-71ca-11e1-9e33-c80aa9429562"}},
	} {
		got, err := parsePosition(tc.text)
		if err != nil || got != tc.want {
			t.Errorf("parse %q = %+v, %v; want %+v", tc.text, got, err, tc.want)
			continue
		}
		if got.String() != tc.text {
			t.Errorf("%+v writes %q, want %q", got, got.String(), tc.text)
		}
	}
	for _, bad := range []string{"", "f.000001:4 0-1-1 0-1-2", "f.000001:4 @a @b", "f.000001:4 @", "f.000001:4 @a 0-1-1"} {
		if p, err := parsePosition(bad); err == nil {
			t.Errorf("parse %q = %+v, want an error", bad, p)
		}
	}
}

// The driver takes one option, follow_failover, as a boolean; any other
// option, or another value, is a usage error.
func TestDriverOptions(t *testing.T) {
	for _, v := range []string{"true", "false", "1"} {
		if _, err := source.Open(context.Background(), "mysql", "mysql://root@h/db", map[string]string{OptionFollowFailover: v}); err != nil {
			t.Errorf("%s=%s refused: %v", OptionFollowFailover, v, err)
		}
	}
	for _, opts := range []map[string]string{{OptionFollowFailover: "yes please"}, {OptionFollowFailover: "true", "publication": "p"}} {
		_, err := source.Open(context.Background(), "mysql", "mysql://root@h/db", opts)
		if !errcode.Is(err, errcode.ConfigInvalid) || errcode.ExitStatus(err) != 2 {
			t.Errorf("%v: %v", opts, err)
		}
	}
}

func TestDSNRefusals(t *testing.T) {
	for _, dsn := range []string{"postgres://x@h/db", "mysql://root@127.0.0.1:3306/", "mysql://root@h/db?server_id=0", "mysql://root@h/db?bogus=1"} {
		_, err := source.Open(context.Background(), "mysql", dsn, nil)
		if !errcode.Is(err, errcode.ConfigInvalid) || errcode.ExitStatus(err) != 2 {
			t.Errorf("%s: %v", dsn, err)
		}
	}
	if _, err := source.Open(context.Background(), "mysql", "mysql://root@h/db", map[string]string{"publication": "p"}); !errcode.Is(err, errcode.ConfigInvalid) {
		t.Errorf("an option was taken: %v", err)
	}
}

func errcodeOf(err error) string {
	if e, ok := errcode.As(err); ok {
		return string(e.Code)
	}
	return ""
}

func testDB(t *testing.T, f *fixture) *sql.DB {
	c, err := parseDSN(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := connect(context.Background(), c, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
