package sqlite

import (
	"context"
	"slices"
)

// batchable reports whether the applier may hold back ts's changes: it
// holds back at all (holdBack: foreign keys are not enforced on its
// connection), no trigger is defined in the database (a trigger would see
// rows sent out of the source's order), and ts is keyless (its inserts
// only are held) or has one key, which inserts arbitrate on, and which is
// the live table's only PRIMARY KEY or UNIQUE constraint (on a table with
// another, two rows sent out of order could collide on it). It asks the
// live table once per definition of ts.
func (a *applier) batchable(ctx context.Context, q execer, ts *tableState) (bool, error) {
	if !batching || !a.holdBack {
		return false, nil
	}
	if ts.batch == 0 {
		ok, err := canHold(ctx, q, ts)
		if err != nil {
			return false, err
		}
		ts.batch = -1
		if ok {
			ts.batch = 1
		}
	}
	return ts.batch > 0, nil
}

func canHold(ctx context.Context, q execer, ts *tableState) (bool, error) {
	if len(ts.keys) > 1 || (len(ts.keys) == 1 && !slices.Equal(ts.insKey, ts.keys[0])) {
		return false, nil
	}
	var triggers int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'`).Scan(&triggers); err != nil {
		return false, classify(err, "look for triggers in the target")
	}
	if triggers > 0 || len(ts.keys) == 0 {
		return triggers == 0, nil
	}
	key := make([]string, len(ts.keys[0]))
	for i, k := range ts.keys[0] {
		key[i] = foldName(ts.cols[k].name)
	}
	cols, err := liveTableColumns(ctx, q, ts.name)
	if err != nil {
		return false, err
	}
	var pk []string
	for _, c := range cols {
		if c.pk > 0 {
			pk = append(pk, c.name)
		}
	}
	if len(pk) > 0 && !sameNames(pk, key) {
		return false, nil
	}
	indexes, err := uniqueIndexNames(ctx, q, ts.name, true)
	if err != nil {
		return false, err
	}
	for _, ix := range indexes {
		k, ok, err := indexColumns(ctx, q, ix)
		if err != nil {
			return false, err
		}
		if !ok || !sameNames(k.cols, key) {
			return false, nil
		}
	}
	return true, nil
}

// sameNames reports whether names, folded, are the set key holds (folded).
func sameNames(names, key []string) bool {
	if len(names) != len(key) {
		return false
	}
	for _, n := range names {
		if !slices.Contains(key, foldName(n)) {
			return false
		}
	}
	return true
}

// foreignKeysOff reports whether q's connection enforces no foreign key
// (the target's DSN turns them off; an operator's setting could turn them
// back on, and then nothing is held back).
func foreignKeysOff(ctx context.Context, q execer) (bool, error) {
	var on int
	if err := q.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&on); err != nil {
		return false, classify(err, "read PRAGMA foreign_keys")
	}
	return on == 0, nil
}
