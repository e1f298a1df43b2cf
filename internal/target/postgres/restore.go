// Package postgres writes a chain into a PostgreSQL target: it recreates the
// recorded schema, bulk-loads a full's row chunks with COPY, and adds keys,
// indexes, constraints and sequence values.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/pgerr"
)

// connect opens a target connection with an empty search_path, so the
// schema-qualified names recorded in the chain resolve exactly, and with
// the chain's text settings, so the target reads values as the source
// printed them whatever its own configuration.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, errors.New(credentials.Redact(err.Error())), "target DSN %s", credentials.Redact(dsn))
	}
	for k, v := range chain.PostgresTextSettings() {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["search_path"] = ""
	cfg.RuntimeParams["application_name"] = "sluice"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err, "connect to target "+credentials.Redact(dsn))
	}
	return conn, nil
}

// targetErrors codes the target's errors: missing privileges refuse, failed
// connections are unreachable, a value the target will not take refuses.
var targetErrors = pgerr.Side{Privileges: errcode.TargetPrivileges, Unreachable: errcode.TargetUnreachable, Value: errcode.TargetValueRefused}

func classify(err error, what string) error { return targetErrors.Classify(err, what) }

func ident(parts ...string) string { return pgx.Identifier(parts).Sanitize() }

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// prepare readies the target for the tables of a schema: it refuses when a
// table the restore would write already holds rows (unless replace, which
// drops them), and creates schemas, extensions, enums and sequences that no
// table owns. Tables themselves are created by LoadTable.
func prepare(ctx context.Context, conn *pgx.Conn, s *chain.Schema, replace bool) error {
	s, err := checkedSchema(s)
	if err != nil {
		return err
	}
	if err := checkExtensions(ctx, conn, s); err != nil {
		return err
	}
	var busy []string
	for i := range s.Tables {
		t := &s.Tables[i]
		var kind string
		err := conn.QueryRow(ctx, `SELECT c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, t.Schema, t.Name).Scan(&kind)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return classify(err, "inspect target table "+t.QualifiedName())
		}
		if replace {
			if err := dropRelation(ctx, conn, t.Schema, t.Name, kind); err != nil {
				return err
			}
			continue
		}
		if kind != "r" && kind != "p" {
			busy = append(busy, t.QualifiedName()+" (not a table)")
			continue
		}
		var has bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+ident(t.Schema, t.Name)+")").Scan(&has); err != nil {
			return classify(err, "inspect target table "+t.QualifiedName())
		}
		if has {
			busy = append(busy, t.QualifiedName())
		}
	}
	if len(busy) > 0 {
		return errcode.New(errcode.TargetNotEmpty, "target tables already hold rows: %s", strings.Join(busy, ", "))
	}
	for _, n := range s.Schemas {
		if err := execDDL(ctx, conn, "CREATE SCHEMA IF NOT EXISTS "+ident(n)); err != nil {
			return classify(err, "create schema "+n)
		}
	}
	for _, e := range s.Extensions {
		// The session's search_path is empty, so the schema is named: the
		// source's, or public for chains that did not record it.
		schema := s.ExtensionSchemas[e]
		if schema == "" {
			schema = "public"
		}
		if err := execDDL(ctx, conn, "CREATE EXTENSION IF NOT EXISTS "+ident(e)+" SCHEMA "+ident(schema)); err != nil {
			return classify(err, "create extension "+e)
		}
	}
	for _, e := range s.Enums {
		labels := make([]string, len(e.Labels))
		for i, l := range e.Labels {
			labels[i] = quoteLiteral(l)
		}
		if err := createTypeIfMissing(ctx, conn, e.Schema, e.Name, fmt.Sprintf("CREATE TYPE %s AS ENUM (%s)", ident(e.Schema, e.Name), strings.Join(labels, ", "))); err != nil {
			return err
		}
	}
	// Recorded in dependency order: each type after the types it uses.
	for _, u := range s.Types {
		if err := createTypeIfMissing(ctx, conn, u.Schema, u.Name, u.Definition); err != nil {
			return err
		}
	}
	for _, q := range s.Sequences {
		if q.OwnedByTable != "" {
			continue
		}
		if err := execDDL(ctx, conn, "DROP SEQUENCE IF EXISTS "+ident(q.Schema, q.Name)+" CASCADE"); err != nil {
			return classify(err, "drop sequence "+q.Name)
		}
		if err := execDDL(ctx, conn, createSequenceSQL(q)); err != nil {
			return classify(err, "create sequence "+q.Name)
		}
	}
	// Partitioned tables hold no rows: they are created bare here, and their
	// partitions, loaded as plain tables, are attached by Finish.
	for i := range s.Tables {
		t := &s.Tables[i]
		if !t.Partitioned() {
			continue
		}
		for _, stmt := range createTableSQL(s, t) {
			if err := execDDL(ctx, conn, stmt); err != nil {
				return classify(err, "create partitioned table "+t.QualifiedName())
			}
		}
	}
	return nil
}

// finishPartitions attaches every partition to its partitioned table with
// its bound, then gives each partitioned table, deepest first, its keys,
// indexes, constraints and sequence values: each attaches the matching
// ones its partitions already have, so nothing is built twice. It runs in
// one transaction, so a retry starts again from plain tables.
func finishPartitions(ctx context.Context, conn *pgx.Conn, s *chain.Schema) error {
	byName := map[string]*chain.Table{}
	var partitioned []*chain.Table
	for i := range s.Tables {
		t := &s.Tables[i]
		byName[t.QualifiedName()] = t
		if t.Partitioned() {
			partitioned = append(partitioned, t)
		}
	}
	if len(partitioned) == 0 {
		return nil
	}
	depth := func(t *chain.Table) int {
		d := 0
		for p := byName[t.PartitionOf]; p != nil && d < len(s.Tables); p = byName[p.PartitionOf] {
			d++
		}
		return d
	}
	sort.SliceStable(partitioned, func(i, j int) bool { return depth(partitioned[i]) > depth(partitioned[j]) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		return classify(err, "begin attaching partitions")
	}
	defer tx.Rollback(context.Background())
	for i := range s.Tables {
		t := &s.Tables[i]
		if t.PartitionOf == "" {
			continue
		}
		parent := byName[t.PartitionOf]
		if parent == nil {
			return fmt.Errorf("partition %s names partitioned table %s, which the schema does not record", t.QualifiedName(), t.PartitionOf)
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = $1::regclass AND inhparent = $2::regclass)`,
			ident(t.Schema, t.Name), ident(parent.Schema, parent.Name)).Scan(&done); err != nil {
			return classify(err, "inspect partition "+t.QualifiedName())
		}
		if done {
			continue
		}
		sql := fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION %s %s", ident(parent.Schema, parent.Name), ident(t.Schema, t.Name), t.PartitionBound)
		if err := execDDLTx(ctx, tx, sql); err != nil {
			return classify(err, "attach partition "+t.QualifiedName())
		}
	}
	for _, t := range partitioned {
		// Prepare created it bare: an index or constraint on it means an
		// earlier attempt of Finish committed this already.
		var finished bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = $1::regclass)
			OR EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = $1::regclass AND contype <> 'n')`, ident(t.Schema, t.Name)).Scan(&finished); err != nil {
			return classify(err, "inspect partitioned table "+t.QualifiedName())
		}
		if finished {
			continue
		}
		for _, stmt := range finishTableSQL(s, t) {
			if err := execDDLTx(ctx, tx, stmt); err != nil {
				return classify(err, "finish partitioned table "+t.QualifiedName()+": "+stmt)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(err, "commit the partitions")
	}
	return nil
}

// checkExtensions refuses, before anything is dropped or created, a target
// on which an extension the schema records is neither installed nor
// available to install.
func checkExtensions(ctx context.Context, conn *pgx.Conn, s *chain.Schema) error {
	if len(s.Extensions) == 0 {
		return nil
	}
	var missing []string
	err := conn.QueryRow(ctx, `
		SELECT coalesce(array_agg(e ORDER BY e), '{}') FROM unnest($1::text[]) e
		WHERE NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = e)
		  AND NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = e)`, s.Extensions).Scan(&missing)
	if err != nil {
		return classify(err, "look up the target's extensions")
	}
	if len(missing) > 0 {
		cmds := make([]string, len(missing))
		for i, m := range missing {
			cmds[i] = "CREATE EXTENSION " + ident(m)
		}
		return errcode.New(errcode.TargetExtensionMissing, "the chain's schema needs extension(s) %s, which the target server cannot install (%s fails there); nothing was changed",
			strings.Join(missing, ", "), strings.Join(cmds, "; "))
	}
	return nil
}

// createTypeIfMissing runs create unless the target already has a type
// schema.name (one a previous attempt of this restore created, say).
func createTypeIfMissing(ctx context.Context, conn *pgx.Conn, schema, name, create string) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1 AND t.typname = $2)`, schema, name).Scan(&exists); err != nil {
		return classify(err, "inspect type "+schema+"."+name)
	}
	if exists {
		return nil
	}
	if err := execDDL(ctx, conn, create); err != nil {
		return classify(err, "create type "+schema+"."+name)
	}
	return nil
}

func dropRelation(ctx context.Context, conn *pgx.Conn, schema, name, kind string) error {
	what := map[string]string{"r": "TABLE", "p": "TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW", "f": "FOREIGN TABLE", "S": "SEQUENCE"}[kind]
	if what == "" {
		return errcode.New(errcode.TargetNotEmpty, "target object %s.%s (relkind %s) is in the way", schema, name, kind)
	}
	if err := execDDL(ctx, conn, fmt.Sprintf("DROP %s %s CASCADE", what, ident(schema, name))); err != nil {
		return classify(err, "drop "+schema+"."+name)
	}
	return nil
}

func createSequenceSQL(q chain.Sequence) string {
	cycle := "NO CYCLE"
	if q.Cycle {
		cycle = "CYCLE"
	}
	return fmt.Sprintf("CREATE SEQUENCE %s AS %s INCREMENT BY %d MINVALUE %d MAXVALUE %d START WITH %d CACHE %d %s",
		ident(q.Schema, q.Name), q.DataType, q.Increment, q.Min, q.Max, q.Start, q.Cache, cycle)
}

// finish adds the foreign keys (every table exists by now) and sets the
// values of sequences no table owns.
func finish(ctx context.Context, conn *pgx.Conn, s *chain.Schema) error {
	s, err := checkedSchema(s)
	if err != nil {
		return err
	}
	if err := finishPartitions(ctx, conn, s); err != nil {
		return err
	}
	for _, t := range s.Tables {
		for _, c := range t.Constraints {
			if c.Type != "f" {
				continue
			}
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`, ident(t.Schema, t.Name), c.Name).Scan(&exists); err != nil {
				return classify(err, "inspect constraint "+c.Name)
			}
			if exists {
				continue
			}
			sql := fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", ident(t.Schema, t.Name), ident(c.Name), c.Definition)
			if err := execDDL(ctx, conn, sql); err != nil {
				return classify(err, "add foreign key "+c.Name+" on "+t.QualifiedName())
			}
		}
	}
	for _, q := range s.Sequences {
		if q.OwnedByTable != "" {
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT setval($1::regclass, $2, $3)", ident(q.Schema, q.Name), q.LastValue, q.IsCalled); err != nil {
			return classify(err, "set sequence "+q.Name)
		}
	}
	return nil
}
