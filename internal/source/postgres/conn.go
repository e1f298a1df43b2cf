package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
)

// classify turns a PostgreSQL or network error into a coded error where one
// applies: privilege errors refuse, connection failures are "unreachable".
func classify(err error, what string) error {
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
			return errcode.Wrap(errcode.SourcePrivileges, err, "%s", what)
		case "28P01", "28000":
			return errcode.Wrap(errcode.SourceUnreachable, err, "%s: authentication failed", what)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return errcode.Wrap(errcode.SourceUnreachable, err, "%s", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// connect opens a connection with an empty search_path, so that every name
// the catalog functions print comes back schema-qualified.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, redactErr(err), "source DSN %s", credentials.Redact(dsn))
	}
	cfg.RuntimeParams["search_path"] = ""
	cfg.RuntimeParams["application_name"] = "sluice"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err, "connect to source "+credentials.Redact(dsn))
	}
	return conn, nil
}

// replicationConnect opens a replication-protocol connection to the database.
func replicationConnect(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, redactErr(err), "source DSN %s", credentials.Redact(dsn))
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "sluice"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err, "open replication connection to "+credentials.Redact(dsn))
	}
	return conn, nil
}

// redactErr keeps a DSN parse error from echoing the password back.
func redactErr(err error) error {
	return errors.New(credentials.Redact(err.Error()))
}
