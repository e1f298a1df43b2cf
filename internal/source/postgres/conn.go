package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/pgerr"
)

// sourceErrors codes the source's errors: missing privileges refuse, failed
// connections are unreachable.
var sourceErrors = pgerr.Side{Privileges: errcode.SourcePrivileges, Unreachable: errcode.SourceUnreachable}

func classify(err error, what string) error { return sourceErrors.Classify(err, what) }

// connect opens a connection with an empty search_path, so that every name
// the catalog functions print comes back schema-qualified, and with the
// chain's text settings, so that values it prints as text read back the same
// on any target.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, redactErr(err), "source DSN %s", credentials.Redact(dsn))
	}
	for k, v := range chain.PostgresTextSettings() {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["search_path"] = ""
	cfg.RuntimeParams["application_name"] = "sluice"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err, "connect to source "+credentials.Redact(dsn))
	}
	return conn, nil
}

// replicationConnect opens a replication-protocol connection to the
// database. pgoutput prints row values with the walsender's output
// functions, so the session carries the chain's text settings.
func replicationConnect(ctx context.Context, dsn, appName string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, redactErr(err), "source DSN %s", credentials.Redact(dsn))
	}
	for k, v := range chain.PostgresTextSettings() {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = appName
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
