package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
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
type execer = sqlkit.Execer

// beginImmediate opens a write transaction on conn, taking the database's
// write lock now rather than at the first write, so two writers queue on
// the busy timeout instead of failing mid-transaction.
func beginImmediate(ctx context.Context, conn *sql.Conn, what string) error {
	return sqlkit.Begin(ctx, conn, "BEGIN IMMEDIATE", classify, what)
}

// commitTx commits conn's open transaction.
func commitTx(ctx context.Context, conn *sql.Conn, what string) error {
	return sqlkit.Commit(ctx, conn, classify, what)
}

// rollbackTx rolls back conn's open transaction, whatever ctx's state.
func rollbackTx(ctx context.Context, conn *sql.Conn) { sqlkit.Rollback(ctx, conn) }

// withWrite runs fn in one BEGIN IMMEDIATE transaction on a connection of
// its own and commits when fn succeeds; it rolls back otherwise.
func withWrite(ctx context.Context, db *sql.DB, what string, fn func(conn *sql.Conn) error) error {
	return sqlkit.WithTx(ctx, db, "BEGIN IMMEDIATE", classify, what, fn)
}
