package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// Server error numbers the target acts on.
const (
	erAccessDenied      = 1045
	erDBAccessDenied    = 1044
	erBadDB             = 1049
	erTableAccessDenied = 1142
	erColAccessDenied   = 1143
	erSpecificAccess    = 1227
	erLockWaitTimeout   = 1205
	erLockDeadlock      = 1213
	erNoSuchTable       = 1146
	erDupEntry          = 1062
)

// valueErrors are the errors of a value a column will not take under the
// strict sql_mode.
var valueErrors = map[uint16]string{
	1048: "a NULL in a NOT NULL column",
	1264: "out of the column's range",
	1265: "truncated",
	1292: "not a value of the column's type",
	1366: "not a value of the column's type",
	1367: "not a valid number",
	1406: "too long for the column",
	1411: "not a value of the column's type",
	3140: "not valid JSON",
	4025: "refused by the column's CHECK constraint",
}

// serverError returns err's MySQL server error, if it is one.
func serverError(err error) (*mysql.MySQLError, bool) {
	var e *mysql.MySQLError
	ok := errors.As(err, &e)
	return e, ok
}

// retryable reports whether err is a deadlock or a lock wait timeout:
// InnoDB rolled the transaction (or the statement) back, and applying it
// again may succeed.
func retryable(err error) bool {
	e, ok := serverError(err)
	return ok && (e.Number == erLockDeadlock || e.Number == erLockWaitTimeout)
}

// classify codes a MySQL error where one applies, with what as context:
// a server that cannot be reached or refuses the login is unreachable, a
// missing privilege is a privilege refusal, a value a column will not take
// is a value refusal. Coded errors pass unchanged.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	if e, ok := serverError(err); ok {
		switch e.Number {
		case erAccessDenied, erBadDB:
			return errcode.Wrap(errcode.TargetUnreachable, err, "%s", what)
		case erDBAccessDenied, erTableAccessDenied, erColAccessDenied, erSpecificAccess:
			return errcode.Wrap(errcode.TargetPrivileges, err, "%s", what)
		}
		if reason, ok := valueErrors[e.Number]; ok {
			return &errcode.Error{Code: errcode.TargetValueRefused, Message: fmt.Sprintf("%s: a value is %s", what, reason), Hint: valueHint, Err: err}
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &ne) {
		return errcode.Wrap(errcode.TargetUnreachable, err, "%s", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// privileged reports whether err says the role may not do something.
func privileged(err error) bool {
	e, ok := serverError(err)
	if !ok {
		return false
	}
	switch e.Number {
	case erDBAccessDenied, erTableAccessDenied, erColAccessDenied, erSpecificAccess:
		return true
	}
	return false
}

// execer is what statements run on: a dedicated connection.
type execer = sqlkit.Execer

// beginTx opens a transaction on conn.
func beginTx(ctx context.Context, conn *sql.Conn, what string) error {
	return sqlkit.Begin(ctx, conn, "START TRANSACTION", classify, what)
}

// commitTx commits conn's open transaction.
func commitTx(ctx context.Context, conn *sql.Conn, what string) error {
	return sqlkit.Commit(ctx, conn, classify, what)
}

// rollbackTx rolls back conn's open transaction, whatever ctx's state.
func rollbackTx(ctx context.Context, conn *sql.Conn) { sqlkit.Rollback(ctx, conn) }
