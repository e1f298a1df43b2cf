// Package pgerr codes PostgreSQL errors for one side of a replication (the
// source or the target): a missing privilege refuses, a failed connection or
// authentication is "unreachable", everything else keeps its context.
package pgerr

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Side names the codes of one side.
type Side struct {
	// Privileges is the code of a missing privilege (SQLSTATE 42501).
	Privileges errcode.Code
	// Unreachable is the code of a failed connection or authentication.
	Unreachable errcode.Code
}

// Classify turns err into a coded error where one applies, with what as
// context. An error that already carries a code is returned unchanged.
func (s Side) Classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42501":
			return errcode.Wrap(s.Privileges, err, "%s", what)
		case "28P01", "28000":
			return errcode.Wrap(s.Unreachable, err, "%s: authentication failed", what)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return errcode.Wrap(s.Unreachable, err, "%s", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}
