package mysql

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

// objectType returns the TABLE_TYPE information_schema records for name
// in the target database ("BASE TABLE", "VIEW", …), or "" when there is
// none.
func objectType(ctx context.Context, q execer, name string) (string, error) {
	var typ string
	err := q.QueryRowContext(ctx, `SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, name).Scan(&typ)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", classify(err, "look up "+name+" in the target")
	}
	return typ, nil
}

// Prepare readies the target for the tables of s: it refuses a schema
// whose names do not map onto MySQL, and one a table of which already holds
// rows in the target (SLUICE-E-TARGET-NOT-EMPTY) unless replace, which
// drops it. A partitioned table, which holds no rows of its own, is
// created bare here (its partitions are tables of their own names), so a
// change a publication sends through the partition root finds it.
func (t *Target) Prepare(ctx context.Context, s *chain.Schema, replace bool) error {
	if err := checkNames(s); err != nil {
		return err
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return classify(err, "connect to prepare the target")
	}
	defer conn.Close()
	var busy []string
	for i := range s.Tables {
		tb := &s.Tables[i]
		name := tableName(tb)
		typ, err := objectType(ctx, conn, name)
		if err != nil {
			return err
		}
		switch {
		case typ == "":
			continue
		case replace:
			drop := "DROP TABLE "
			if typ == "VIEW" {
				drop = "DROP VIEW "
			}
			if _, err := conn.ExecContext(ctx, drop+quoteIdent(name)); err != nil {
				return classify(err, "drop "+name)
			}
			continue
		case typ == "VIEW":
			busy = append(busy, fmt.Sprintf("%s (%s is a view)", tb.QualifiedName(), name))
			continue
		}
		var one int
		err = conn.QueryRowContext(ctx, "SELECT 1 FROM "+quoteIdent(name)+" LIMIT 1").Scan(&one)
		switch {
		case err == nil:
			busy = append(busy, tb.QualifiedName()+" (MySQL table "+name+")")
		case err != sql.ErrNoRows:
			return classify(err, "inspect target table "+name)
		}
	}
	if len(busy) > 0 {
		return errcode.New(errcode.TargetNotEmpty, "target tables already hold rows: %s", strings.Join(busy, ", "))
	}
	for i := range s.Tables {
		tb := withKinds(s, &s.Tables[i])
		if !tb.Partitioned() {
			continue
		}
		for _, stmt := range []string{"DROP TABLE IF EXISTS " + quoteIdent(tableName(tb)), createTableSQL(tb, t.flavor, false)} {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return classify(err, "create partitioned table "+tb.QualifiedName())
			}
		}
	}
	return nil
}

// LoadTable recreates one table (with its primary key) and fills it from
// its chunks in one transaction, so a retried load starts from scratch and
// never doubles a row. It returns the rows loaded.
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
	if tb.Partitioned() {
		return 0, nil
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return 0, classify(err, "connect for the load of "+td.Table)
	}
	defer conn.Close()
	name := tableName(tb)
	for _, stmt := range []string{"DROP TABLE IF EXISTS " + quoteIdent(name), createTableSQL(withKinds(s, tb), t.flavor, false)} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return 0, classify(err, "create "+td.Table)
		}
	}
	if err := beginTx(ctx, conn, "load of "+td.Table); err != nil {
		return 0, err
	}
	rows, err := loadChunks(ctx, conn, ch, s, tb, td, t.flavor, progress)
	if err == nil && rows != td.Rows {
		err = fmt.Errorf("table %s: loaded %d rows, the manifest records %d", td.Table, rows, td.Rows)
	}
	if err == nil {
		err = commitTx(ctx, conn, "load of "+td.Table)
	}
	if err != nil {
		rollbackTx(ctx, conn)
		return 0, err
	}
	return rows, nil
}

// Finish adds every table's secondary indexes, UNIQUE ones included, in
// one ALTER TABLE per table (one pass over its rows), then the foreign
// keys whose definitions translate. Partial and expression indexes, CHECK
// constraints and sequences are PostgreSQL SQL the target does not carry;
// each skipped object is logged.
func (t *Target) Finish(ctx context.Context, s *chain.Schema) error {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return classify(err, "connect to index the target")
	}
	defer conn.Close()
	for i := range s.Tables {
		tb := withKinds(s, &s.Tables[i])
		if tb.Partitioned() {
			continue
		}
		for _, ix := range tb.Indexes {
			if why := indexSkipped(tb, ix); why != "" {
				slog.Info("MySQL target: index not created", "table", tb.QualifiedName(), "index", ix.Name, "reason", why)
			} else if !keptIndex(tb, ix) {
				slog.Info("MySQL target: index not created", "table", tb.QualifiedName(), "index", ix.Name, "reason", "it covers a JSON or array column, which MySQL does not index")
			}
		}
		live, err := readLive(ctx, conn, tableName(tb))
		if err != nil {
			return err
		}
		var clauses []string
		for _, c := range indexClauses(tb) {
			if !hasIndexClause(live, c) {
				clauses = append(clauses, c)
			}
		}
		if len(clauses) > 0 {
			stmt := "ALTER TABLE " + quoteIdent(tableName(tb)) + " " + strings.Join(clauses, ", ")
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return classify(err, "index "+tb.QualifiedName())
			}
		}
	}
	return addForeignKeys(ctx, conn, s)
}

// hasIndexClause reports whether the index an ADD INDEX clause names exists
// already (a retried Finish).
func hasIndexClause(live *liveTable, clause string) bool {
	start := strings.IndexByte(clause, '`')
	end := strings.Index(clause, "` (")
	if start < 0 || end <= start {
		return false
	}
	name := strings.ReplaceAll(clause[start+1:end], "``", "`")
	_, ok := live.indexes[name]
	return ok
}
