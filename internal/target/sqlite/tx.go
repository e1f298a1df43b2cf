package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluicehq/sluice/internal/errcode"
)

// classify codes an SQLite error where one applies, with what as context: a
// file that cannot be opened is unreachable, a read-only or forbidden file
// is a privilege refusal, a value SQLite will not store (too big, a type
// mismatch) is a value refusal. Coded errors pass unchanged.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB:
			return errcode.Wrap(errcode.TargetUnreachable, err, "%s", what)
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			return errcode.Wrap(errcode.TargetPrivileges, err, "%s", what)
		case sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
			return errcode.Wrap(errcode.TargetValueRefused, err, "%s: SQLite will not store a value", what)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// readOnly reports whether err says the database file may not be written.
func readOnly(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return true
	}
	return false
}

// execer is what statements run on: a dedicated connection.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

var _ execer = (*sql.Conn)(nil)

// beginImmediate opens a write transaction on conn, taking the database's
// write lock now rather than at the first write, so two writers queue on
// the busy timeout instead of failing mid-transaction.
func beginImmediate(ctx context.Context, conn *sql.Conn, what string) error {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return classify(err, "begin "+what)
	}
	return nil
}

// commitTx commits conn's open transaction.
func commitTx(ctx context.Context, conn *sql.Conn, what string) error {
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return classify(err, "commit "+what)
	}
	return nil
}

// rollbackTx rolls back conn's open transaction, whatever ctx's state. A
// connection whose rollback fails is discarded rather than handed back to
// the pool inside a transaction.
func rollbackTx(ctx context.Context, conn *sql.Conn) {
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// withWrite runs fn in one BEGIN IMMEDIATE transaction on a connection of
// its own and commits when fn succeeds; it rolls back otherwise.
func withWrite(ctx context.Context, db *sql.DB, what string, fn func(conn *sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return classify(err, "connect for "+what)
	}
	defer conn.Close()
	if err := beginImmediate(ctx, conn, what); err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		rollbackTx(ctx, conn)
		return err
	}
	if err := commitTx(ctx, conn, what); err != nil {
		rollbackTx(ctx, conn)
		return err
	}
	return nil
}
