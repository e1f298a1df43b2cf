package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// objectType returns the type SQLite records for the object holding name
// ("table", "view", …), or "" when there is none. Names compare as SQLite
// compares them, without ASCII case.
func objectType(ctx context.Context, q execer, name string) (string, string, error) {
	var typ, stored string
	err := q.QueryRowContext(ctx, `SELECT type, name FROM sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')`, name).Scan(&typ, &stored)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", classify(err, "look up "+name+" in the target")
	}
	return typ, stored, nil
}

// Prepare readies the target for the tables of s: it refuses a schema whose
// names collide in SQLite, and one a table of which already holds rows in
// the target (SLUICE-E-TARGET-NOT-EMPTY) unless replace, which drops it. It
// creates partitioned tables, which hold no rows of their own, bare; every
// other table is created by LoadTable.
func (t *Target) Prepare(ctx context.Context, s *chain.Schema, replace bool) error {
	if err := checkNames(s); err != nil {
		return err
	}
	return withWrite(ctx, t.db, "prepare the target", func(conn *sql.Conn) error {
		var busy []string
		for i := range s.Tables {
			tb := &s.Tables[i]
			name := tableName(tb)
			typ, stored, err := objectType(ctx, conn, name)
			if err != nil {
				return err
			}
			switch {
			case typ == "":
				continue
			case replace:
				if _, err := conn.ExecContext(ctx, "DROP "+strings.ToUpper(typ)+" "+quoteIdent(stored)); err != nil {
					return classify(err, "drop "+stored)
				}
				continue
			case typ != "table":
				busy = append(busy, fmt.Sprintf("%s (%s is a %s)", tb.QualifiedName(), stored, typ))
				continue
			}
			var has bool
			if err := conn.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM "+quoteIdent(stored)+")").Scan(&has); err != nil {
				return classify(err, "inspect target table "+stored)
			}
			if has {
				busy = append(busy, tb.QualifiedName()+" (SQLite table "+stored+")")
			}
		}
		if len(busy) > 0 {
			return errcode.New(errcode.TargetNotEmpty, "target tables already hold rows: %s", strings.Join(busy, ", "))
		}
		for i := range s.Tables {
			tb := &s.Tables[i]
			if !tb.Partitioned() {
				continue
			}
			for _, stmt := range []string{"DROP TABLE IF EXISTS " + quoteIdent(tableName(tb)), createTableSQL(tb, tableName(tb), false)} {
				if _, err := conn.ExecContext(ctx, stmt); err != nil {
					return classify(err, "create partitioned table "+tb.QualifiedName())
				}
			}
		}
		return nil
	})
}

// LoadTable recreates one table bare and fills it from its chunks in one
// BEGIN IMMEDIATE transaction (drop, create, insert), so a retried load
// starts from scratch and never doubles a row. It returns the rows loaded.
func (t *Target) LoadTable(ctx context.Context, ch *chain.Chain, s *chain.Schema, td chain.TableData, progress target.LoadProgress) (int64, error) {
	tb := s.Table(td.Table)
	if tb == nil {
		return 0, fmt.Errorf("table %s has data in the manifest but no recorded schema", td.Table)
	}
	if err := ddlcheck.CheckTable(tb, ddlcheck.NamesOf(s)); err != nil {
		return 0, err
	}
	if err := newNameSet().takeTable(tb); err != nil {
		return 0, err
	}
	var rows int64
	err := withWrite(ctx, t.db, "load of "+td.Table, func(conn *sql.Conn) error {
		name := tableName(tb)
		for _, stmt := range []string{"DROP TABLE IF EXISTS " + quoteIdent(name), createTableSQL(tb, name, false)} {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return classify(err, "create "+td.Table)
			}
		}
		var err error
		rows, err = loadChunks(ctx, conn, ch, s, tb, td, progress)
		if err != nil {
			return err
		}
		if rows != td.Rows {
			return fmt.Errorf("table %s: loaded %d rows, the manifest records %d", td.Table, rows, td.Rows)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rows, nil
}

// Finish creates the indexes of every table after its data: UNIQUE ones
// (which inserts arbitrate on) and plain ones over columns. Partial and
// expression indexes are skipped and logged. Foreign keys, CHECK
// constraints and sequences are not carried to SQLite.
func (t *Target) Finish(ctx context.Context, s *chain.Schema) error {
	return withWrite(ctx, t.db, "create the indexes", func(conn *sql.Conn) error {
		for i := range s.Tables {
			tb := &s.Tables[i]
			for _, ix := range tb.Indexes {
				if why := indexSkipped(tb, ix); why != "" {
					slog.Info("SQLite target: index not created", "table", tb.QualifiedName(), "index", ix.Name, "reason", why)
				}
			}
			for _, stmt := range createIndexSQL(tb) {
				if _, err := conn.ExecContext(ctx, stmt); err != nil {
					return classify(err, "index "+tb.QualifiedName()+": "+stmt)
				}
			}
		}
		return nil
	})
}
