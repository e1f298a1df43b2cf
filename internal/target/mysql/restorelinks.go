package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// restoreLinksSQL creates the table recording how far a restore applied
// each incremental: applied_through counts the records of the incremental
// committed on the target, and done is set in the transaction that
// commits its last. An incremental applies in one transaction unless it
// holds schema changes or truncates, whose implicit commits split it; the
// count is written before and after each of them, so a restore retried
// after a crash resumes where the target stands and applies nothing twice.
func restoreLinksSQL(f flavor) string {
	return `CREATE TABLE IF NOT EXISTS ` + restoreLinksTable + ` (
		chain_id        VARCHAR(255) NOT NULL,
		link_id         VARCHAR(255) NOT NULL,
		applied_through BIGINT       NOT NULL DEFAULT 0,
		done            TINYINT(1)   NOT NULL DEFAULT 0,
		applied_at      DATETIME(6)  NOT NULL,
		PRIMARY KEY (chain_id, link_id))` + tableOptions(f)
}

// RestoreIncremental applies incremental m of chain chainID unless the
// target records it as applied, and reports whether it applied it. schema
// is the schema in force before m. It checks the transaction framing and
// that m's chunks hold the changes and transactions m records before the
// last commit. records, when positive, applies only m's first records, and
// sel, when not nil, only the changes it keeps of them.
func (t *Target) RestoreIncremental(ctx context.Context, ch *chain.Chain, chainID string, m *chain.Manifest, schema *chain.Schema, sel *target.Selection, records int64, progress func(changes int64)) (bool, error) {
	if m == nil || m.Kind != chain.KindIncremental {
		return false, errcode.New(errcode.ManifestInvalid, "restore incremental: link is not an incremental")
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return false, classify(err, "connect for the restore of incremental "+m.ID)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, restoreLinksSQL(t.flavor)); err != nil {
		return false, classify(err, "create "+restoreLinksTable)
	}
	var through int64
	var done bool
	err = conn.QueryRowContext(ctx, `SELECT applied_through, done FROM `+restoreLinksTable+` WHERE chain_id = ? AND link_id = ?`, chainID, m.ID).Scan(&through, &done)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, classify(err, "read "+restoreLinksTable)
	case done:
		return false, nil
	}
	r := &linkRestore{conn: conn, chainID: chainID, link: m.ID, app: newApplier(t.flavor, schema, nil, nil)}
	defer r.app.close()
	if err := beginTx(ctx, conn, "restore of incremental "+m.ID); err != nil {
		return false, err
	}
	var index int64
	err = ch.WalkIncremental(ctx, m, func(c *chain.Change) error {
		i := index
		index++
		c, keep := sel.Keep(c)
		if !keep {
			return nil // a table the subset leaves out
		}
		if i < through {
			r.app.track(c)
			return nil
		}
		if records > 0 && i >= records {
			return nil // after the point: read and checked, not applied
		}
		if c.Op != chain.OpSchema && c.Op != chain.OpTruncate {
			if err := r.app.apply(ctx, conn, c); err != nil {
				return fmt.Errorf("incremental %s: %w", m.ID, err)
			}
			return nil
		}
		// What came before commits with the count of it; the change then
		// commits implicitly, and the count past it commits right after.
		if err := r.record(ctx, i, false); err != nil {
			return err
		}
		if err := implicitHook(ctx, c, false); err != nil {
			return err
		}
		if err := r.app.apply(ctx, conn, c); err != nil {
			return fmt.Errorf("incremental %s: %w", m.ID, err)
		}
		if err := implicitHook(ctx, c, true); err != nil {
			return err
		}
		if err := beginTx(ctx, conn, "restore of incremental "+m.ID); err != nil {
			return err
		}
		return r.record(ctx, i+1, false)
	}, func(changes int64) error {
		if progress != nil {
			progress(changes)
		}
		return nil
	})
	if err == nil {
		err = r.record(ctx, index, true)
	}
	if err != nil {
		rollbackTx(ctx, conn)
		return false, err
	}
	return true, nil
}

// linkRestore is one incremental's restore in progress.
type linkRestore struct {
	conn    *sql.Conn
	chainID string
	link    string
	app     *applier
}

// record writes how many records of the incremental the target holds (and
// whether that is all of them) and commits. With more to come, the next
// transaction is begun by the caller.
func (r *linkRestore) record(ctx context.Context, through int64, done bool) error {
	if err := r.app.flush(ctx, r.conn); err != nil {
		return fmt.Errorf("incremental %s: %w", r.link, err)
	}
	_, err := r.conn.ExecContext(ctx, `INSERT INTO `+restoreLinksTable+` (chain_id, link_id, applied_through, done, applied_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
		ON DUPLICATE KEY UPDATE applied_through = VALUES(applied_through), done = VALUES(done), applied_at = VALUES(applied_at)`, r.chainID, r.link, through, done)
	if err != nil {
		return classify(err, "record the restore of incremental "+r.link)
	}
	return commitTx(ctx, r.conn, "restore of incremental "+r.link)
}

// ClearRestoreLinks forgets which incrementals of chainID a restore
// applied; a restore that starts over calls it before loading anything.
func (t *Target) ClearRestoreLinks(ctx context.Context, chainID string) error {
	_, err := t.db.ExecContext(ctx, `DELETE FROM `+restoreLinksTable+` WHERE chain_id = ?`, chainID)
	if e, ok := serverError(err); ok && e.Number == erNoSuchTable {
		return nil
	}
	if err != nil {
		return classify(err, "clear "+restoreLinksTable)
	}
	return nil
}
