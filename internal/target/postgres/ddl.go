package postgres

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/errcode"
)

// checkedSchema is the schema this target builds from: every recorded
// text checked and rendered again (ddlcheck.Postgres), then every table
// of another dialect turned into the table it is stored as (nativeSchema).
// What fails is refused with SLUICE-E-CHAIN-SCHEMA-REFUSED before anything
// is sent.
func checkedSchema(s *chain.Schema) (*chain.Schema, error) {
	c, err := ddlcheck.Postgres(s)
	if err != nil {
		return nil, err
	}
	return nativeSchema(c), nil
}

// execDDL sends one statement alone: it must parse as exactly one
// statement, and it goes over the extended protocol, which refuses a
// second one too (pgx's Exec without arguments would use the simple
// protocol, which runs any number).
func execDDL(ctx context.Context, conn *pgx.Conn, sql string) error {
	if err := ddlcheck.PGOneStatement(sql); err != nil {
		return errcode.New(errcode.ChainSchemaRefused, "a statement built from the chain's schema is refused: %v; statement %q", err, sql)
	}
	_, err := conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, nil).Close()
	return err
}

// execDDLTx is execDDL inside tx.
func execDDLTx(ctx context.Context, tx pgx.Tx, sql string) error { return execDDL(ctx, tx.Conn(), sql) }

var superuserWarned sync.Once

// warnSuperuser logs once per process when a lane's role is a superuser,
// which the server reports at connect (is_superuser): the broker needs
// far less, and a superuser turns any mistake into one with every
// privilege of the server (docs/security.md).
func warnSuperuser(pc *pgconn.PgConn) {
	if pc.ParameterStatus("is_superuser") != "on" {
		return
	}
	superuserWarned.Do(func() {
		slog.Warn("the broker's PostgreSQL target role is a superuser; it needs only the privileges docs/security.md lists",
			"user", pc.ParameterStatus("session_authorization"))
	})
}
