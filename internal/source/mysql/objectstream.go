package mysql

import (
	"context"
	"regexp"

	"github.com/sluicehq/sluice/internal/chain"
)

// objectDDL matches the statements that may create, change or drop a view,
// routine, trigger, event or table comment: CREATE, ALTER, DROP and RENAME
// (a dropped or renamed table takes its triggers with it).
var objectDDL = regexp.MustCompile(`(?is)^\s*(?:/\*.*?\*/\s*)*(create|alter|drop|rename)\b`)

// objectStatement follows a schema statement of the captured database
// through the binlog. The objects the statement may have changed are read
// again (as the server has them now) and, when they differ from the ones
// recorded last, the window carries the schema with the new set. The
// statement's own transaction, which changes no row, is then delivered
// (a begin and a commit, under its GTID) so that the window commits an
// incremental even when nothing else happens in it: the broker, which
// applies the difference after that incremental, learns of the change at
// the statement's place in the stream.
func (c *capture) objectStatement(ctx context.Context, wn *window, stmt string) error {
	if !objectDDL.MatchString(stmt) {
		return nil
	}
	objs, err := readObjects(ctx, c.db, c.c.database, c.o.Filter)
	if err != nil {
		return err
	}
	if chain.SameObjects(objs, c.track.objects) {
		return nil
	}
	c.track.objects = objs
	c.track.objectsChanged = true
	tx := wn.tx
	if tx == nil || tx.began || tx.xa != "" {
		// No transaction to deliver (or it delivers itself): the next
		// window that commits carries the objects.
		return nil
	}
	tx.began = true
	return wn.sink(&chain.Change{Op: chain.OpBegin, Identified: true, Tx: tx.gtid, LSN: tx.start.lsn(), CommitTime: tx.commitTime})
}
