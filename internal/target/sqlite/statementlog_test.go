package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	sqlitedriver "modernc.org/sqlite"

	"github.com/sluicehq/sluice/internal/target/targettest"
)

// statementLog records every statement text a database/sql pool sends to
// SQLite: executed, queried or prepared.
type statementLog struct {
	mu    sync.Mutex
	stmts []string
}

func (l *statementLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stmts = append(l.stmts, s)
}

// Statements returns what was sent so far, in order.
func (l *statementLog) Statements() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.stmts)
}

// tracingConnector opens modernc.org/sqlite connections that report every
// statement to log before the driver sees it.
type tracingConnector struct {
	driver.Connector
	log *statementLog
}

func (c tracingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tracedConn{Conn: conn, log: c.log}, nil
}

// tracedConn forwards every optional interface of the driver's connection
// (see sqlitedriver.NewConnector) and records each statement text.
type tracedConn struct {
	driver.Conn
	log *statementLog
}

var errNotSupported = errors.New("the wrapped SQLite connection lacks this interface")

func (c *tracedConn) Unwrap() driver.Conn { return c.Conn }

func (c *tracedConn) Prepare(query string) (driver.Stmt, error) {
	c.log.add(query)
	return c.Conn.Prepare(query)
}

func (c *tracedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.log.add(query)
	p, ok := c.Conn.(driver.ConnPrepareContext)
	if !ok {
		return nil, errNotSupported
	}
	return p.PrepareContext(ctx, query)
}

func (c *tracedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.log.add(query)
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return e.ExecContext(ctx, query, args)
}

func (c *tracedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.log.add(query)
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return q.QueryContext(ctx, query, args)
}

func (c *tracedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errNotSupported
	}
	return b.BeginTx(ctx, opts)
}

func (c *tracedConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *tracedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *tracedConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// openTraced opens a target on a new database file of t whose every
// statement goes to the returned log.
func openTraced(t testing.TB) (*Target, *statementLog) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "target.db")
	_, dsn, err := driverDSN(path)
	if err != nil {
		t.Fatal(err)
	}
	base, err := sqlitedriver.NewConnector(dsn)
	if err != nil {
		t.Fatal(err)
	}
	log := &statementLog{}
	db := sql.OpenDB(tracingConnector{Connector: base, log: log})
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	tg := &Target{db: db, path: path}
	t.Cleanup(func() { tg.Close(context.Background()) })
	return tg, log
}

// Every forged schema is refused by every reader, and the statements sent
// meanwhile are all statements the same readers send for the clean schema:
// nothing of the forgery reached SQLite.
func TestForgedSchemaStatementLog(t *testing.T) {
	clean, cleanLog := openTraced(t)
	targettest.CleanReaders(t, clean)
	expected := cleanLog.Statements()
	if len(expected) == 0 {
		t.Fatal("the trace recorded nothing")
	}
	for _, f := range targettest.Forgeries() {
		t.Run(f.Name, func(t *testing.T) {
			tg, log := openTraced(t)
			targettest.ForgedReaders(t, tg, f)
			targettest.RequireExpected(t, expected, log.Statements())
		})
	}
}

// Names holding quotes, semicolons and comment openers are kept as the
// names: the table is restored and replayed under exactly them, and every
// statement sent holds them only inside quoted identifiers.
func TestHostileNamesStatementLog(t *testing.T) {
	tg, log := openTraced(t)
	tb, want := targettest.HostileNames(t, tg)
	wantRows(t, tg, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sluice%' ORDER BY name`, tb.Name)
	var got []string
	rows, err := tg.db.Query(fmt.Sprintf(`SELECT * FROM %s ORDER BY 1`, quoteIdent(tb.Name)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !slices.Equal(cols, []string{targettest.HostileKey, targettest.HostileColumn1, targettest.HostileColumn2}) {
		t.Errorf("columns %q", cols)
	}
	for rows.Next() {
		var id, a, b string
		if err := rows.Scan(&id, &a, &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+"|"+a+"|"+b)
	}
	var wantFlat []string
	for _, r := range want {
		wantFlat = append(wantFlat, r[0]+"|"+r[1]+"|"+r[2])
	}
	if !slices.Equal(got, wantFlat) {
		t.Errorf("rows %q, want %q", got, wantFlat)
	}
	targettest.RequireInertNames(t, log.Statements(), false)
}
