package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

// xaUnnamed keys the held changes of a prepared XA transaction whose XID
// is not known yet.
const xaUnnamed = "?"

// MariaDB GTID event flags.
const (
	mariaStandalone  = 0x01
	mariaPreparedXA  = 0x40
	mariaCompletedXA = 0x80
)

// window is the state of one Next call.
type window struct {
	lim     source.Limits
	sink    source.Sink
	w       source.Window
	started time.Time
	lastTx  time.Time
	until   *position
	before  *position
	tx      *openTx
	held    map[string]*heldXA
	change  chain.Change
	// rawNew and rawOld hold a filtered table's row images as the binlog
	// logs them, before they are projected into change.
	rawNew, rawOld []chain.Value
}

// Next captures one window of whole transactions into sink.
func (c *capture) Next(ctx context.Context, lim source.Limits, sink source.Sink) (source.Window, error) {
	if c.ended {
		return source.Window{}, errors.New("the capture ended with a window bounded by Before")
	}
	wn := &window{lim: lim, sink: sink, started: time.Now(), held: map[string]*heldXA{}}
	wn.lastTx = wn.started
	wn.w.End = c.pos.String()
	for _, b := range []struct {
		s   string
		dst **position
	}{{lim.Until, &wn.until}, {lim.Before, &wn.before}} {
		if b.s == "" {
			continue
		}
		p, err := parsePosition(b.s)
		if err != nil {
			return source.Window{}, errcode.Wrap(errcode.ConfigInvalid, err, "window bound")
		}
		*b.dst = &p
	}
	lastReport := time.Time{}
	for {
		if lim.Tick != nil {
			lim.Tick()
		}
		between := wn.tx == nil && len(wn.held) == 0
		if between {
			if time.Since(lastReport) >= source.ReportEvery {
				lastReport = time.Now()
				if lim.Log != nil {
					h, err := c.LogHealth(ctx)
					if err != nil {
						return source.Window{}, err
					}
					lim.Log(h)
				}
				if lim.Tables != nil {
					lim.Tables(nil) // no table's writes fail for being captured
				}
			}
			if c.windowDone(wn) {
				break
			}
		}
		ectx, cancel := context.WithTimeout(ctx, pollEvery)
		ev, err := c.stream.GetEvent(ectx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return source.Window{}, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				if between {
					if done, err := c.quiet(ctx, wn); err != nil || done {
						if err != nil {
							return source.Window{}, err
						}
						break
					}
				}
				continue
			}
			return source.Window{}, replicationError(err, "read the binlog")
		}
		stop, err := c.handle(ctx, wn, ev)
		if err != nil {
			return source.Window{}, err
		}
		if stop {
			c.ended = true
			break
		}
	}
	if c.track.changed || c.track.objectsChanged {
		wn.w.Schema = c.track.schema()
		c.track.changed = false
		if wn.w.Transactions > 0 {
			c.track.objectsChanged = false // the window commits, and carries them
		}
	}
	return wn.w, nil
}

// windowDone reports, between transactions, whether the window's limits end
// it now.
func (c *capture) windowDone(wn *window) bool {
	lim := wn.lim
	if wn.w.Transactions > 0 {
		if lim.Duration > 0 && time.Since(wn.started) >= lim.Duration {
			return true
		}
		if lim.Changes > 0 && wn.w.Changes >= lim.Changes {
			return true
		}
		if lim.Bytes > 0 && wn.w.Bytes >= lim.Bytes {
			return true
		}
	}
	if wn.until != nil && c.read.lsn() >= wn.until.lsn() {
		return true
	}
	if wn.before != nil && c.read.lsn() >= wn.before.lsn() {
		// Every transaction before the bound is delivered: the window
		// ends there even when nothing follows it yet.
		c.ended = true
		return true
	}
	return lim.Stop != nil && lim.Stop()
}

// quiet handles a poll that heard nothing between transactions: the window
// ends once idle long enough, and a source with nothing the chain lacks
// counts as drained.
func (c *capture) quiet(ctx context.Context, wn *window) (bool, error) {
	if wn.lim.Drained != nil && wn.w.Transactions == 0 {
		cur, err := currentPosition(ctx, c.db, c.srv)
		if err != nil {
			return false, err
		}
		if cur.lsn() <= c.read.lsn() {
			wn.lim.Drained()
		}
	}
	if wn.lim.Idle > 0 && time.Since(wn.lastTx) >= wn.lim.Idle {
		return true, nil
	}
	if wn.lim.Duration > 0 && wn.w.Transactions > 0 && time.Since(wn.started) >= wn.lim.Duration {
		return true, nil
	}
	return false, nil
}

// handle reads one binlog event. stop is true when a Before window ends at
// a transaction that starts at or after its bound.
func (c *capture) handle(ctx context.Context, wn *window, ev *replication.BinlogEvent) (stop bool, err error) {
	h := ev.Header
	evStart := c.read
	if _, heartbeat := ev.Event.(*replication.HeartbeatEvent); !heartbeat && h.LogPos > 0 {
		c.read.offset = h.LogPos
	}
	wn.w.Bytes += int64(h.EventSize)
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		c.read = position{file: string(e.NextLogName), offset: uint32(e.Position), gtid: c.read.gtid, server: c.tag}
	case *replication.MariadbGTIDEvent:
		if wn.before != nil && evStart.lsn() >= wn.before.lsn() {
			return true, nil
		}
		gtid := e.GTID.String()
		wn.tx = &openTx{gtid: gtid, standalone: e.Flags&mariaStandalone != 0, start: evStart, commitTime: int64(h.Timestamp) * 1_000_000}
		if e.Flags&mariaPreparedXA != 0 {
			wn.tx.xa = xaUnnamed
		}
	case *replication.GTIDEvent:
		if wn.before != nil && evStart.lsn() >= wn.before.lsn() {
			return true, nil
		}
		next, err := e.GTIDNext()
		if err != nil {
			return false, fmt.Errorf("read a GTID event: %w", err)
		}
		// MySQL logs a schema change as a lone query after its GTID; a
		// transaction opens with BEGIN.
		wn.tx = &openTx{gtid: next.String(), standalone: true, start: evStart, commitTime: int64(h.Timestamp) * 1_000_000}
	case *replication.QueryEvent:
		return false, c.query(ctx, wn, e, h)
	case *replication.FormatDescriptionEvent:
		// A binlog file begins, perhaps of a server that restarted.
		c.track.newLog()
	case *replication.TableMapEvent:
		if string(e.Schema) != c.c.database || wn.tx == nil {
			return false, nil
		}
		_, def, err := c.track.resolve(ctx, e)
		if err != nil {
			return false, err
		}
		if def != nil {
			ch := c.newChange(wn, chain.OpSchema)
			ch.Table = def.QualifiedName()
			ch.Schema = def
			return false, c.emit(wn, ch)
		}
	case *replication.RowsEvent:
		return false, c.rows(wn, e, h)
	case *replication.XIDEvent:
		return false, c.commit(wn, h)
	case *replication.GenericEvent:
		if h.EventType == replication.XA_PREPARE_LOG_EVENT {
			return false, c.prepared(wn)
		}
	}
	return false, nil
}

// query reads a query event: the statements around transactions, schema
// changes and truncates, and a refusal for row changes logged as
// statements.
func (c *capture) query(ctx context.Context, wn *window, e *replication.QueryEvent, h *replication.EventHeader) error {
	q := strings.TrimSpace(string(e.Query))
	upper := strings.ToUpper(q)
	switch {
	case upper == "BEGIN" || upper == "START TRANSACTION":
		if wn.tx != nil {
			wn.tx.standalone = false
		}
		return nil
	case upper == "COMMIT":
		return c.commit(wn, h)
	case upper == "ROLLBACK":
		wn.tx = nil
		return nil
	case savepoint.MatchString(q):
		return nil
	}
	if m := xaStmt.FindStringSubmatch(q); m != nil {
		return c.xa(wn, strings.ToLower(m[1]), m[2], h)
	}
	ours := string(e.Schema) == c.c.database || strings.Contains(q, c.c.database)
	if m := truncateStmt.FindStringSubmatch(q); m != nil && ours {
		db, table := splitName(m[1], string(e.Schema))
		if db == c.c.database {
			if err := c.truncate(wn, table); err != nil {
				return err
			}
		}
	} else if dmlStmt.MatchString(q) && string(e.Schema) == c.c.database {
		return &errcode.Error{Code: errcode.SourceLogConfig,
			Message: fmt.Sprintf("the binlog holds a row change logged as a statement (%.60q): a session wrote with binlog_format STATEMENT or MIXED, and its rows cannot be read back", q),
			Hint:    "Set binlog_format = ROW globally and restart the application's connections (a session keeps the format it started with), then take a new full backup into a new chain: the rows that statement changed are not in this chain."}
	} else if ours || string(e.Schema) == "" {
		c.track.schemaChanged()
		if err := c.objectStatement(ctx, wn, q); err != nil {
			return err
		}
	}
	if wn.tx != nil && wn.tx.standalone {
		return c.commit(wn, h)
	}
	return nil
}

// splitName splits a possibly qualified, possibly quoted table name.
func splitName(name, defaultDB string) (string, string) {
	unq := func(s string) string {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "`") && strings.HasSuffix(s, "`") && len(s) >= 2 {
			return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
		}
		return s
	}
	if i := dotOutsideQuotes(name); i >= 0 {
		return unq(name[:i]), unq(name[i+1:])
	}
	return defaultDB, unq(name)
}

func dotOutsideQuotes(s string) int {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '`':
			quoted = !quoted
		case '.':
			if !quoted {
				return i
			}
		}
	}
	return -1
}

// newChange readies the window's reusable change record for the open
// transaction's next change.
func (c *capture) newChange(wn *window, op chain.Op) *chain.Change {
	ch := &wn.change
	*ch = chain.Change{Op: op, New: ch.New[:0], Old: ch.Old[:0], Identified: true, Tx: wn.tx.gtid,
		LSN: c.read.lsn(), Ordinal: wn.tx.ordinal}
	wn.tx.ordinal++
	return ch
}

// emit delivers a change of the open transaction, after its Begin record
// (sent at its first change, so a transaction that changes nothing the
// chain holds leaves no trace). An XA transaction's prepared changes are
// held instead.
func (c *capture) emit(wn *window, ch *chain.Change) error {
	tx := wn.tx
	if tx.xa != "" {
		held := wn.held[tx.xa]
		if held == nil {
			held = &heldXA{}
			wn.held[tx.xa] = held
		}
		held.changes = append(held.changes, ch.Clone())
		return nil
	}
	if !tx.began {
		tx.began = true
		if err := wn.sink(&chain.Change{Op: chain.OpBegin, Identified: true, Tx: tx.gtid, LSN: tx.start.lsn(), CommitTime: tx.commitTime}); err != nil {
			return err
		}
	}
	wn.w.Changes++
	return wn.sink(ch)
}

// commit closes the open transaction: its Commit record goes to the sink
// when it delivered anything, and the window's end moves past it.
func (c *capture) commit(wn *window, h *replication.EventHeader) error {
	tx := wn.tx
	wn.tx = nil
	if tx == nil {
		return nil
	}
	if err := c.gtids.Update(tx.gtid); err != nil {
		return fmt.Errorf("track GTID %s: %w", tx.gtid, err)
	}
	c.read.gtid = c.gtids.String()
	if tx.xa != "" || !tx.began {
		if !tx.began && len(wn.held) == 0 {
			// Nothing delivered: the next window may start past it.
			c.pos = c.read
		}
		return nil
	}
	if err := wn.sink(&chain.Change{Op: chain.OpCommit, Identified: true, Tx: tx.gtid, LSN: c.read.lsn(),
		EndLSN: c.read.lsn(), CommitTime: tx.commitTime}); err != nil {
		return err
	}
	wn.w.Transactions++
	wn.w.LastCommit = time.UnixMicro(tx.commitTime).UTC()
	wn.lastTx = time.Now()
	if len(wn.held) == 0 {
		c.pos = c.read
		wn.w.End = c.pos.String()
	}
	return nil
}

// truncate records TRUNCATE of a captured table (not of one the filter
// leaves out).
func (c *capture) truncate(wn *window, table string) error {
	if wn.tx == nil || !c.o.Filter.Includes(c.c.database, table) {
		return nil
	}
	ch := c.newChange(wn, chain.OpTruncate)
	ch.Tables = []string{c.c.database + "." + table}
	return c.emit(wn, ch)
}

// rows reads a rows event of a captured table into changes.
func (c *capture) rows(wn *window, e *replication.RowsEvent, h *replication.EventHeader) error {
	if e.Table == nil || string(e.Table.Schema) != c.c.database || wn.tx == nil {
		return nil
	}
	tr := c.track.byID[e.TableID]
	if tr == nil {
		return fmt.Errorf("a rows event of %s.%s before its table map", e.Table.Schema, e.Table.Table)
	}
	if tr.excluded {
		// The filter leaves the table out; its transaction still passes.
		return nil
	}
	name := tr.recorded.QualifiedName()
	op, step := rowsOp(h.EventType)
	if op == 0 {
		return fmt.Errorf("binlog event type %v is not a rows event sluice reads", h.EventType)
	}
	for i := 0; i+step <= len(e.Rows); i += step {
		ch := c.newChange(wn, op)
		ch.Table = name
		var err error
		switch op {
		case chain.OpInsert:
			ch.New, err = c.image(tr, ch.New, &wn.rawNew, e.Rows[i])
		case chain.OpDelete:
			ch.OldKind = 'O'
			ch.Old, err = c.image(tr, ch.Old, &wn.rawOld, e.Rows[i])
		case chain.OpUpdate:
			ch.OldKind = 'O'
			if ch.Old, err = c.image(tr, ch.Old, &wn.rawOld, e.Rows[i]); err == nil {
				ch.New, err = c.image(tr, ch.New, &wn.rawNew, e.Rows[i+1])
			}
		}
		if err != nil {
			return errcode.Wrap(errcode.SourceSchemaUnsupported, err, "a row of %s at %s cannot be carried", name, c.read)
		}
		if err := c.emit(wn, ch); err != nil {
			return err
		}
	}
	return nil
}

// image encodes a row image of table tr into dst (reused). A table that
// crosses as it is is encoded straight into dst; a shaped one is encoded
// into raw (the window's own buffer, never a change's) and projected from
// there into dst, so the two never share an array.
func (c *capture) image(tr *tracked, dst []chain.Value, raw *[]chain.Value, row []any) ([]chain.Value, error) {
	if tr.shape == nil {
		return rowValues(dst, tr.codecs, row, true)
	}
	full, err := rowValues(*raw, tr.codecs, row, true)
	if err != nil {
		return nil, err
	}
	*raw = full
	return tr.shape.Project(dst[:0], full), nil
}

// rowsOp is the change a rows event type records and how many images a
// change takes.
func rowsOp(t replication.EventType) (chain.Op, int) {
	switch t {
	case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2, replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:
		return chain.OpInsert, 1
	case replication.DELETE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2, replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		return chain.OpDelete, 1
	case replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2, replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1:
		return chain.OpUpdate, 2
	}
	return 0, 0
}

// xa follows an XA transaction. Its prepared part (XA START … XA END, XA
// PREPARE) is held in memory, not delivered; XA COMMIT delivers it as one
// transaction under the commit's GTID, XA ROLLBACK drops it. While one is
// held the window does not end, so a window's end never lies between an
// XA transaction's prepare and its outcome. XA COMMIT … ONE PHASE is an
// ordinary transaction.
func (c *capture) xa(wn *window, verb, xid string, h *replication.EventHeader) error {
	tx := wn.tx
	switch verb {
	case "start", "begin":
		if tx != nil {
			tx.xa = xid
		}
		return nil
	case "end":
		// MariaDB names a prepared transaction's XID in its GTID event,
		// which go-mysql does not decode, and logs no XA START: the XID
		// is learnt here.
		if tx != nil && tx.xa == xaUnnamed {
			if held := wn.held[xaUnnamed]; held != nil {
				delete(wn.held, xaUnnamed)
				wn.held[xid] = held
			}
			tx.xa = xid
		}
		return nil
	case "prepare":
		return c.prepared(wn)
	case "commit":
		// The changes held since the prepare (or, one phase, since XA
		// START) are delivered under the commit's GTID.
		held := wn.held[xid]
		delete(wn.held, xid)
		if tx == nil {
			return nil
		}
		tx.xa = ""
		if held != nil {
			for _, ch := range held.changes {
				ch.Tx, ch.Ordinal = tx.gtid, tx.ordinal
				tx.ordinal++
				if err := c.emit(wn, ch); err != nil {
					return err
				}
			}
		}
		return c.commit(wn, h)
	case "rollback":
		delete(wn.held, xid)
		if tx != nil {
			tx.xa = ""
			tx.began = false
		}
		return c.commit(wn, h)
	}
	return nil
}

// prepared ends an XA transaction's prepared part: its changes stay held.
func (c *capture) prepared(wn *window) error {
	if wn.tx == nil {
		return nil
	}
	tx := wn.tx
	wn.tx = nil
	if err := c.gtids.Update(tx.gtid); err != nil {
		return fmt.Errorf("track GTID %s: %w", tx.gtid, err)
	}
	c.read.gtid = c.gtids.String()
	// A prepared transaction that changed nothing the chain holds is not
	// held: its outcome has nothing to deliver.
	return nil
}
