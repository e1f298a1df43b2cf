// Package sqlkit is the machinery the targets written on database/sql (the
// SQLite and MySQL engines) share: transactions on a dedicated connection,
// a cache of prepared statements keyed by the shape of a change, the
// decoding of a chain's values into statement arguments with refusals that
// name the table and column, the loop over a full's row chunks, and the
// scan of a table back into neutral values. Engines keep their SQL, types
// and control tables; nothing here knows a dialect.
package sqlkit

import (
	"context"
	"database/sql"
	"database/sql/driver"
)

// Execer is what statements run on: a dedicated connection.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

var _ Execer = (*sql.Conn)(nil)

// Classify turns a driver error into the engine's coded error, with what
// as context.
type Classify func(err error, what string) error

// Begin opens a transaction on conn with the engine's statement (BEGIN
// IMMEDIATE, START TRANSACTION).
func Begin(ctx context.Context, conn *sql.Conn, stmt string, classify Classify, what string) error {
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return classify(err, "begin "+what)
	}
	return nil
}

// Commit commits conn's open transaction.
func Commit(ctx context.Context, conn *sql.Conn, classify Classify, what string) error {
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return classify(err, "commit "+what)
	}
	return nil
}

// Rollback rolls back conn's open transaction, whatever ctx's state. A
// connection whose rollback fails is discarded rather than handed back to
// the pool inside a transaction.
func Rollback(ctx context.Context, conn *sql.Conn) {
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// WithTx runs fn in one transaction (opened with begin) on a connection of
// its own and commits when fn succeeds; it rolls back otherwise.
func WithTx(ctx context.Context, db *sql.DB, begin string, classify Classify, what string, fn func(conn *sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return classify(err, "connect for "+what)
	}
	defer conn.Close()
	if err := Begin(ctx, conn, begin, classify, what); err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		Rollback(ctx, conn)
		return err
	}
	if err := Commit(ctx, conn, classify, what); err != nil {
		Rollback(ctx, conn)
		return err
	}
	return nil
}

// Strings runs a query of one text column and returns its values in order;
// a failure is classified as what.
func Strings(ctx context.Context, q Execer, classify Classify, what, query string, args ...any) ([]string, error) {
	r, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, classify(err, what)
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			return nil, classify(err, what)
		}
		out = append(out, s)
	}
	if err := r.Err(); err != nil {
		return nil, classify(err, what)
	}
	return out, nil
}
