package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/errcode"
)

// What a full backup does about tables its publication would publish
// without a usable replica identity (FullBackupOptions.SetReplicaIdentity).
const (
	// IdentityRefuse refuses with SLUICE-E-SOURCE-REPLICA-IDENTITY, listing
	// each table and its fix, before anything is created (the default).
	IdentityRefuse = "refuse"
	// IdentityAuto sets each table's replica identity itself (USING INDEX
	// a NOT NULL unique index where one exists, FULL otherwise) before the
	// publication and the slot are created.
	IdentityAuto = "auto"
)

// identityLockTimeout bounds how long one ALTER TABLE … REPLICA IDENTITY
// waits for its ACCESS EXCLUSIVE lock: while it waits, the application's
// statements on the table queue behind it.
const identityLockTimeout = 5 * time.Second

// IdentityGap is a table that a publication publishes (or would publish)
// with updates or deletes while it has no usable replica identity: from the
// moment it is published, PostgreSQL rejects those statements in the
// application ("cannot update table … because it does not have a replica
// identity and publishes updates").
type IdentityGap struct {
	// Table is the table's qualified name, quoted where SQL needs it.
	Table string `json:"table"`
	// Why says what is wrong with its replica identity.
	Why string `json:"why"`
	// Fails lists the statements that fail: UPDATE, DELETE or both.
	Fails []string `json:"fails"`
	// Fix is the statement that gives the table a usable identity.
	Fix string `json:"fix"`
}

// publicationFacts is what decides which tables a publication publishes and
// which of their statements need a replica identity.
type publicationFacts struct {
	oid       uint32
	exists    bool
	allTables bool
	updates   bool
	deletes   bool
}

// readPublication reads publication name; a missing one is described as the
// one sluice would create (FOR ALL TABLES, every action) when name is the
// default, and as publishing nothing otherwise (ensurePublication refuses it).
func readPublication(ctx context.Context, conn *pgx.Conn, name string) (publicationFacts, error) {
	var p publicationFacts
	err := conn.QueryRow(ctx, `SELECT oid, puballtables, pubupdate, pubdelete FROM pg_publication WHERE pubname = $1`, name).
		Scan(&p.oid, &p.allTables, &p.updates, &p.deletes)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if name == DefaultPublication {
			return publicationFacts{allTables: true, updates: true, deletes: true}, nil
		}
		return publicationFacts{}, nil
	case err != nil:
		return p, classify(err, "look up publication "+name)
	}
	p.exists = true
	return p, nil
}

// identityGaps lists, in name order, every table publication name publishes
// (or, for the default publication not created yet, would publish) whose
// UPDATE or DELETE the publication's actions make PostgreSQL check for a
// replica identity it lacks. PostgreSQL checks the table written to, so a
// partitioned table's leaves are the ones listed, whatever the publication's
// publish_via_partition_root says, and a leaf is published when it or one of
// its ancestors (by name or by schema) is.
func identityGaps(ctx context.Context, conn *pgx.Conn, name string) ([]IdentityGap, error) {
	p, err := readPublication(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	if !p.updates && !p.deletes {
		return nil, nil
	}
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return nil, classify(err, "read the source version")
	}
	bySchema := "false"
	if version >= 150000 { // FOR TABLES IN SCHEMA
		bySchema = `EXISTS (SELECT 1 FROM pg_publication_namespace pn WHERE pn.pnpubid = $1 AND pn.pnnspid = ac.relnamespace)`
	}
	rows, err := conn.Query(ctx, `
		SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relreplident::text,
		       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary AND i.indisvalid),
		       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident AND i.indisvalid AND i.indislive),
		       coalesce((
		         SELECT quote_ident(ic.relname)
		         FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
		         WHERE i.indrelid = c.oid AND i.indisunique AND NOT i.indisprimary AND i.indimmediate
		           AND i.indisvalid AND i.indislive AND i.indpred IS NULL AND i.indexprs IS NULL
		           AND NOT EXISTS (
		             SELECT 1 FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
		             LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		             WHERE k.ord <= i.indnkeyatts AND (k.attnum <= 0 OR NOT coalesce(a.attnotnull, false)))
		         ORDER BY i.indnkeyatts, ic.relname LIMIT 1), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND c.relpersistence = 'p' AND c.oid >= `+fmt.Sprint(firstUserOID)+`
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
		  AND c.relreplident <> 'f'
		  AND ($2 OR EXISTS (
		    SELECT 1 FROM (SELECT c.oid AS relid UNION SELECT relid FROM pg_partition_ancestors(c.oid)) a
		    JOIN pg_class ac ON ac.oid = a.relid
		    WHERE EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = $1 AND pr.prrelid = a.relid)
		       OR `+bySchema+`))
		ORDER BY n.nspname, c.relname`, p.oid, p.allTables)
	if err != nil {
		return nil, classify(err, "look up the replica identities of the tables publication "+name+" publishes")
	}
	defer rows.Close()
	var fails []string
	if p.updates {
		fails = append(fails, "UPDATE")
	}
	if p.deletes {
		fails = append(fails, "DELETE")
	}
	var gaps []IdentityGap
	for rows.Next() {
		var table, ident, index string
		var hasPK, hasIdentityIndex bool
		if err := rows.Scan(&table, &ident, &hasPK, &hasIdentityIndex, &index); err != nil {
			return nil, classify(err, "read replica identities")
		}
		g := IdentityGap{Table: table, Fails: fails}
		switch {
		case ident == "d" && !hasPK:
			g.Why = "no primary key"
		case ident == "i" && !hasIdentityIndex:
			g.Why = "its REPLICA IDENTITY index is gone or not valid"
		case ident == "n":
			g.Why = "REPLICA IDENTITY NOTHING"
		default:
			continue
		}
		switch {
		case hasPK:
			g.Fix = "ALTER TABLE " + table + " REPLICA IDENTITY DEFAULT"
		case index != "":
			g.Fix = "ALTER TABLE " + table + " REPLICA IDENTITY USING INDEX " + index
		default:
			g.Fix = "ALTER TABLE " + table + " REPLICA IDENTITY FULL"
		}
		gaps = append(gaps, g)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read replica identities")
	}
	return gaps, nil
}

// identityRefusal is SLUICE-E-SOURCE-REPLICA-IDENTITY naming every table of
// gaps and its fix.
func identityRefusal(publication string, exists bool, gaps []IdentityGap) error {
	var b strings.Builder
	if exists {
		fmt.Fprintf(&b, "publication %s publishes %d table(s) without a usable replica identity", publication, len(gaps))
	} else {
		fmt.Fprintf(&b, "publication %s (FOR ALL TABLES, which this command would create) would publish %d table(s) without a usable replica identity", publication, len(gaps))
	}
	fmt.Fprintf(&b, ", so the application's %s on them would fail; nothing was created on the source:", strings.Join(gaps[0].Fails, " and "))
	for _, g := range gaps {
		fmt.Fprintf(&b, "\n  %s (%s): %s;", g.Table, g.Why, g.Fix)
	}
	return &errcode.Error{Code: errcode.SourceReplicaIdentity, Message: b.String(),
		Hint: "Run the ALTER TABLE statement listed for each table (USING INDEX names a NOT NULL unique index of the table; FULL makes every update and delete log the whole old row), " +
			"or pass --set-replica-identity auto to `sluice backup full` to have sluice run them; then run the command again."}
}

// checkReplicaIdentity runs before the chain's publication and slot exist:
// it finds the tables publication would publish without a usable replica
// identity and refuses (IdentityRefuse) or fixes them (IdentityAuto),
// telling onSet of each table it changed.
func checkReplicaIdentity(ctx context.Context, conn *pgx.Conn, publication, mode string, onSet func(IdentityGap)) error {
	switch mode {
	case "", IdentityRefuse, IdentityAuto:
	default:
		return errcode.New(errcode.ConfigInvalid, "--set-replica-identity %q: give %s or %s", mode, IdentityRefuse, IdentityAuto)
	}
	gaps, err := identityGaps(ctx, conn, publication)
	if err != nil || len(gaps) == 0 {
		return err
	}
	p, err := readPublication(ctx, conn, publication)
	if err != nil {
		return err
	}
	if mode != IdentityAuto {
		return identityRefusal(publication, p.exists, gaps)
	}
	for _, g := range gaps {
		if err := setReplicaIdentity(ctx, conn, g); err != nil {
			return err
		}
		if onSet != nil {
			onSet(g)
		}
	}
	// A table created meanwhile, or an ALTER that did not take, is refused
	// rather than published.
	if gaps, err = identityGaps(ctx, conn, publication); err != nil {
		return err
	}
	if len(gaps) > 0 {
		return identityRefusal(publication, p.exists, gaps)
	}
	return nil
}

// setReplicaIdentity runs g's fix in its own transaction, waiting at most
// identityLockTimeout for the table's lock so the application's statements
// never queue long behind it.
func setReplicaIdentity(ctx context.Context, conn *pgx.Conn, g IdentityGap) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return classify(err, "begin setting the replica identity of "+g.Table)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", identityLockTimeout.Milliseconds())); err != nil {
		return classify(err, "set lock_timeout")
	}
	if _, err := tx.Exec(ctx, g.Fix); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			return &errcode.Error{Code: errcode.SourceReplicaIdentity, Err: err,
				Message: fmt.Sprintf("%s: another session held a lock on the table for %s, so its replica identity was not set; no publication or slot was created", g.Fix, identityLockTimeout),
				Hint:    "Find the session holding the lock (pg_locks joined to pg_stat_activity) and let it finish, or run the ALTER TABLE yourself at a quiet moment; then run the command again."}
		}
		return classify(err, g.Fix)
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(err, g.Fix)
	}
	return nil
}
