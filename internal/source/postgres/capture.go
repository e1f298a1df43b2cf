package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
)

// DefaultPublication is the publication a producer creates (for all tables)
// when none is named.
const DefaultPublication = "sluice_all_tables"

// CaptureOptions configure a capture session on a chain's slot.
type CaptureOptions struct {
	// DSN is the source connection string, password resolved.
	DSN string
	// Slot is the chain's logical replication slot.
	Slot string
	// Publication names the publication to read; DefaultPublication (created
	// for all tables when missing) when empty.
	Publication string
	// Source is what the chain records about its source; a session against
	// another cluster or database is refused.
	Source chain.SourceInfo
	// Owner names the run that reads the slot (the streaming producer's
	// workflow). Its replication connections carry it (as a digest) in
	// application_name, so when the slot is still held by one of them — an
	// earlier attempt whose connection died where the server has not
	// noticed yet — the capture ends that connection and takes the slot.
	// Empty: any holder is refused.
	Owner string
	// OnTakeOver, when set, is told the process ID of a connection the
	// capture ended to take the slot over.
	OnTakeOver func(pid int32)
	// Filter is the filter the chain's segment was written with (nil:
	// none); the recorded schema is already shaped by it. The publication
	// still publishes every table: the capture drops the row changes of
	// tables the filter leaves out (their transactions still pass, so the
	// position moves), leaves them out of truncates and schema changes,
	// and passes every row image of the others through their shape.
	Filter *filter.Filter
}

// Capture reads whole source transactions from the chain's slot with
// pgoutput (protocol 2, no streaming of in-progress transactions, so a
// transaction arrives whole and in commit order).
type Capture struct {
	o     CaptureOptions
	sql   *pgx.Conn
	repl  *pgconn.PgConn
	start pglogrepl.LSN
	// safe is the position the slot may be confirmed to: everything before
	// it is committed in the chain (or was never part of it).
	safe pglogrepl.LSN
	// confirmed is the last position sent as flushed (the slot's, once the
	// server took it).
	confirmed pglogrepl.LSN
	// received is the furthest position the server reported sending.
	received pglogrepl.LSN
	// drained is the furthest server WAL end a keepalive reported while
	// the current window stood between transactions it had delivered: once
	// the window is committed (Confirm), nothing before it is missing from
	// the chain. Without it, a session kept across windows on a quiet
	// source would never move the slot past the last transaction: the
	// server pings only while the client has not acknowledged what it
	// sent, and this client acknowledges every keepalive's position.
	drained   pglogrepl.LSN
	relations map[uint32]*pglogrepl.RelationMessageV2
	// shapes holds how each relation crosses (nil: as is) and skipped
	// the relations the filter leaves out; both are set from the
	// relation's latest Relation message.
	shapes  map[uint32]*filter.Shape
	skipped map[uint32]bool
	// rawNew and rawOld hold a row image over the relation's columns, and
	// newBuf and oldBuf its projection, reused from change to change.
	rawNew, rawOld, newBuf, oldBuf []chain.Value
	tracker                        *schemaTracker
	lastSent                       time.Time
	// spent is set once a window stopped in front of a transaction it did
	// not deliver; the stream is no longer at a transaction boundary.
	spent bool
}

// OpenCapture connects to the source, checks it is the chain's source,
// ensures the publication, and starts streaming from start (the chain tip's
// end position). schema is the chain's recorded schema as of start.
func OpenCapture(ctx context.Context, o CaptureOptions, start string, schema *chain.Schema) (*Capture, error) {
	if o.Publication == "" {
		o.Publication = DefaultPublication
	}
	startLSN, err := pglogrepl.ParseLSN(start)
	if err != nil {
		return nil, errcode.Wrap(errcode.ChainInvalid, err, "chain tip position %q", start)
	}
	c := &Capture{o: o, start: startLSN, safe: startLSN, relations: map[uint32]*pglogrepl.RelationMessageV2{},
		shapes: map[uint32]*filter.Shape{}, skipped: map[uint32]bool{}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if c.sql, err = connect(ctx, o.DSN); err != nil {
		return nil, err
	}
	c.tracker = newSchemaTracker(c.sql, schema)
	c.tracker.filter = o.Filter
	if _, err := SlotHealth(ctx, c.sql, o.Slot); err != nil {
		return nil, err
	}
	if err := ensurePublication(ctx, c.sql, o.Publication); err != nil {
		return nil, err
	}
	if err := c.startStreaming(ctx, startLSN); err != nil {
		return nil, err
	}
	// Confirm what the chain already holds at once, so a crash between a
	// catalog commit and its confirmation releases the WAL now.
	if err := c.confirm(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// startStreaming starts streaming the slot at start. A slot still held by one of this
// owner's own connections (dead, unnoticed by the server) is taken over
// first; any other holder is refused with SLUICE-E-SOURCE-READER-IN-USE.
func (c *Capture) startStreaming(ctx context.Context, start pglogrepl.LSN) error {
	err := c.startReplication(ctx, start)
	if err == nil || c.o.Owner == "" || !slotInUse(err) {
		return err
	}
	pid, took, err := takeOverSlot(ctx, c.sql, c.o.Slot, ownerAppName(c.o.Owner))
	if err != nil {
		return err
	}
	if !took {
		return errSlotInUse(nil, "replication slot %s is in use by another client (process %d), not by this producer", c.o.Slot, pid)
	}
	if c.o.OnTakeOver != nil && pid != 0 {
		c.o.OnTakeOver(pid)
	}
	return c.startReplication(ctx, start)
}

// startReplication opens the replication connection (a new one each time,
// so a refused start can be tried again), checks the source and starts
// streaming the slot at start.
func (c *Capture) startReplication(ctx context.Context, start pglogrepl.LSN) error {
	if c.repl != nil {
		_ = c.repl.Close(context.Background())
		c.repl = nil
	}
	repl, err := replicationConnect(ctx, c.o.DSN, ownerAppName(c.o.Owner))
	if err != nil {
		return err
	}
	c.repl = repl
	sys, err := pglogrepl.IdentifySystem(ctx, c.repl)
	if err != nil {
		return classify(err, "identify source system")
	}
	if c.o.Source.SystemID != "" && (sys.SystemID != c.o.Source.SystemID || sys.DBName != c.o.Source.Database) {
		return errcode.New(errcode.SourceMismatch, "the source is system %s database %q, the chain was taken from system %s database %q",
			sys.SystemID, sys.DBName, c.o.Source.SystemID, c.o.Source.Database)
	}
	err = pglogrepl.StartReplication(ctx, c.repl, c.o.Slot, start, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '2'", "publication_names '" + c.o.Publication + "'", "messages 'false'", "streaming 'off'"},
	})
	if err != nil {
		return startError(err, c.o.Slot)
	}
	return nil
}

func startError(err error, slot string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "55006": // object_in_use: another consumer holds the slot
			return errSlotInUse(err, "replication slot %s is in use by another connection", slot)
		case "55000": // object_not_in_prerequisite_state: invalidated
			return errSlotInvalidated(err, "replication slot %s can no longer be read", slot)
		case "42704":
			if strings.Contains(pgErr.Message, "publication") {
				return errcode.Wrap(errcode.PublicationMissing, err,
					"the publication did not exist yet at the chain's position (it must be created before the chain slot; `sluice backup full --chain-slot` does this)")
			}
			return errSlotMissing(err, "replication slot %s does not exist", slot)
		}
	}
	return classify(err, "start replication on slot "+slot)
}

// ensurePublication creates the default publication when it is missing,
// unless a table it would publish has no usable replica identity; a named
// publication must exist.
func ensurePublication(ctx context.Context, conn *pgx.Conn, name string) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, name).Scan(&exists); err != nil {
		return classify(err, "look up publication "+name)
	}
	if exists {
		return nil
	}
	if name != DefaultPublication {
		return errcode.New(errcode.PublicationMissing, "publication %q does not exist on the source", name)
	}
	// FOR ALL TABLES makes PostgreSQL reject the application's updates and
	// deletes on every table without a usable replica identity: refuse first.
	gaps, err := identityGaps(ctx, conn, name)
	if err != nil {
		return err
	}
	if len(gaps) > 0 {
		return identityRefusal(name, false, gaps)
	}
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{name}.Sanitize()+" FOR ALL TABLES"); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // created concurrently
			return nil
		}
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return errcode.Wrap(errcode.SourcePrivileges, err, "the source role may not create publication %q FOR ALL TABLES (superuser only)", name)
		}
		return classify(err, "create publication "+name)
	}
	return nil
}

// Close ends the session.
func (c *Capture) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.repl != nil {
		_ = c.repl.Close(ctx)
	}
	if c.sql != nil {
		_ = c.sql.Close(ctx)
	}
}

// Confirm marks everything before pos as safely in the chain; the slot may
// release the WAL behind it. The position never moves backwards.
func (c *Capture) Confirm(ctx context.Context, pos string) error {
	lsn, err := pglogrepl.ParseLSN(pos)
	if err != nil {
		return fmt.Errorf("confirm position %q: %w", pos, err)
	}
	if lsn > c.safe {
		c.safe = lsn
	}
	if c.drained > c.safe && c.drained >= lsn {
		// The window that ends at pos was committed, and the server
		// had sent everything before drained while it was open.
		c.safe = c.drained
	}
	c.drained = 0
	return c.confirm(ctx)
}

func (c *Capture) confirm(ctx context.Context) error {
	c.lastSent = time.Now()
	// Write is what arrived (so the server stops pinging for it); flush,
	// which moves the slot, is only what the chain holds.
	err := pglogrepl.SendStandbyStatusUpdate(ctx, c.repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: max(c.received, c.safe), WALFlushPosition: c.safe, WALApplyPosition: c.safe,
	})
	if err != nil {
		return classify(err, "confirm slot position")
	}
	c.confirmed = c.safe
	return nil
}

// Next captures one window of whole transactions into sink.
func (c *Capture) Next(ctx context.Context, lim source.Limits, sink source.Sink) (source.Window, error) {
	r, err := c.newWindowRun(lim, sink)
	if err != nil {
		return source.Window{}, err
	}
	for {
		r.turns++
		r.report(ctx)
		if !r.inTx {
			done, err := r.finished(ctx)
			if done || err != nil {
				return r.w, err
			}
		}
		if time.Since(c.lastSent) > 5*time.Second {
			if err := c.confirm(ctx); err != nil {
				return r.w, err
			}
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		msg, err := c.repl.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return r.w, ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			return r.w, classify(err, "read the replication stream")
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return r.w, startError(pgconn.ErrorResponseToPgError(m), c.o.Slot)
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				err = r.keepalive(ctx, m.Data[1:])
			case pglogrepl.XLogDataByteID:
				err = r.xlogData(ctx, m.Data[1:])
			}
			if err != nil {
				return r.w, err
			}
		}
	}
}

// windowRun is one window of Next: its bounds and limits, the window it
// builds, and where the stream is within it.
type windowRun struct {
	c    *Capture
	lim  source.Limits
	sink source.Sink
	// until and before are the window's bounds (zero when unbounded).
	until, before pglogrepl.LSN
	w             source.Window
	// end is where the window's last whole transaction ends.
	end pglogrepl.LSN
	// began is when the window began, lastTx when its last transaction
	// committed.
	began, lastTx time.Time
	// inTx is set between a transaction's begin and commit; caughtUp once
	// the stream has delivered everything up to a bound.
	inTx, caughtUp bool
	// ch is the change being delivered, ordinal the next one's ordinal
	// within the transaction.
	ch      chain.Change
	ordinal uint32
	turns   int
	// slotReadAt and identityReadAt are when the slot's health and the
	// tables' replica identities were last reported.
	slotReadAt, identityReadAt time.Time
}

// newWindowRun starts a window at the capture's start, within lim's
// bounds.
func (c *Capture) newWindowRun(lim source.Limits, sink source.Sink) (*windowRun, error) {
	r := &windowRun{c: c, lim: lim, sink: sink, w: source.Window{End: c.start.String()}, end: c.start}
	var err error
	if lim.Until != "" {
		if r.until, err = pglogrepl.ParseLSN(lim.Until); err != nil {
			return nil, fmt.Errorf("window bound %q: %w", lim.Until, err)
		}
	}
	if lim.Before != "" {
		if r.before, err = pglogrepl.ParseLSN(lim.Before); err != nil {
			return nil, fmt.Errorf("window bound %q: %w", lim.Before, err)
		}
	}
	if c.spent {
		return nil, errors.New("capture session already ended at a rotation bound")
	}
	c.drained = 0
	r.began = time.Now()
	r.lastTx = r.began
	return r, nil
}

// report ticks the run's liveness and, between transactions every
// source.ReportEvery, reports the slot's health and the tables' replica
// identities.
func (r *windowRun) report(ctx context.Context) {
	lim := r.lim
	if lim.Tick != nil && (!r.inTx || r.turns%1024 == 0) {
		lim.Tick()
	}
	if r.inTx {
		return
	}
	if lim.Log != nil && time.Since(r.slotReadAt) >= source.ReportEvery {
		r.slotReadAt = time.Now()
		if st, err := r.c.LogHealth(ctx); err == nil {
			lim.Log(st)
		}
	}
	if lim.Tables != nil && time.Since(r.identityReadAt) >= source.ReportEvery {
		r.identityReadAt = time.Now()
		if gaps, err := identityGaps(ctx, r.c.sql, r.c.o.Publication); err == nil {
			lim.Tables(tableIssues(gaps))
		}
	}
}

// finished decides, between transactions, whether the window ends here:
// a limit reached after a transaction, an idle window, a stop asked for,
// or a bound caught up with. An ending window records its end and schema.
func (r *windowRun) finished(ctx context.Context) (bool, error) {
	c, lim, w := r.c, r.lim, &r.w
	done := w.Transactions > 0 && ((lim.Duration > 0 && time.Since(r.began) >= lim.Duration) ||
		(lim.Changes > 0 && w.Changes >= lim.Changes) || (lim.Bytes > 0 && w.Bytes >= lim.Bytes) ||
		(r.until != 0 && r.end >= r.until))
	if w.Transactions == 0 && lim.Idle > 0 && time.Since(r.lastTx) >= lim.Idle {
		done = true
	}
	if (lim.Stop != nil && lim.Stop()) || r.caughtUp {
		done = true
	}
	if !done {
		return false, nil
	}
	if c.safe > c.confirmed {
		// A quiet window learnt from keepalives that the source has
		// nothing the chain lacks up to c.safe: say so before the session
		// ends, or windows shorter than the periodic confirm would never
		// let the slot release WAL.
		if err := c.confirm(ctx); err != nil {
			return true, err
		}
	}
	w.End = r.end.String()
	c.start = r.end
	if err := c.tracker.refreshObjects(ctx); err != nil {
		return true, err
	}
	w.Schema = c.tracker.schema()
	return true, nil
}

// keepalive takes a primary keepalive message: how far the server's WAL
// goes, and so what the window and the slot may count as delivered.
func (r *windowRun) keepalive(ctx context.Context, data []byte) error {
	c, w := r.c, &r.w
	ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data)
	if err != nil {
		return fmt.Errorf("parse keepalive: %w", err)
	}
	c.received = max(c.received, ka.ServerWALEnd)
	if !r.inTx && w.Transactions > 0 && r.before == 0 && ka.ServerWALEnd > c.drained {
		// Everything before this point is in the window; it is safe once
		// the window is committed.
		c.drained = ka.ServerWALEnd
	}
	if !r.inTx && w.Transactions == 0 {
		if ka.ServerWALEnd > c.safe {
			// Nothing is pending: every transaction before this point was
			// delivered and committed, so the slot may move on.
			c.safe = ka.ServerWALEnd
		}
		if r.lim.Drained != nil {
			r.lim.Drained()
		}
	}
	if !r.inTx && ((r.until != 0 && ka.ServerWALEnd >= r.until) || (r.before != 0 && ka.ServerWALEnd >= r.before)) {
		// Everything up to the bound was decoded and delivered.
		r.caughtUp = true
	}
	if ka.ReplyRequested {
		return c.confirm(ctx)
	}
	return nil
}

// xlogData decodes one pgoutput message and delivers what it carries.
func (r *windowRun) xlogData(ctx context.Context, data []byte) error {
	c := r.c
	xld, err := pglogrepl.ParseXLogData(data)
	if err != nil {
		return fmt.Errorf("parse XLogData: %w", err)
	}
	r.w.Bytes += int64(len(xld.WALData))
	c.received = max(c.received, xld.WALStart)
	lm, err := pglogrepl.ParseV2(xld.WALData, false)
	if err != nil {
		return fmt.Errorf("decode pgoutput message at %s: %w", xld.WALStart, err)
	}
	at := xld.WALStart
	switch lm := lm.(type) {
	case *pglogrepl.RelationMessageV2:
		return r.relation(ctx, lm, at)
	case *pglogrepl.BeginMessage:
		if r.before != 0 && lm.FinalLSN >= r.before {
			r.caughtUp, c.spent = true, true
			return nil
		}
		r.inTx = true
		r.ordinal = 0
		r.ch = chain.Change{Op: chain.OpBegin, XID: lm.Xid, CommitLSN: uint64(lm.FinalLSN), LSN: uint64(at),
			CommitTime: lm.CommitTime.UnixMicro(), Identified: true}
		return r.sink(&r.ch)
	case *pglogrepl.CommitMessage:
		r.ch = chain.Change{Op: chain.OpCommit, XID: r.ch.XID, CommitLSN: uint64(lm.CommitLSN), LSN: uint64(at),
			CommitTime: lm.CommitTime.UnixMicro(), EndLSN: uint64(lm.TransactionEndLSN), Identified: true}
		if err := r.sink(&r.ch); err != nil {
			return err
		}
		r.inTx = false
		r.w.Transactions++
		r.end = lm.TransactionEndLSN
		r.w.LastCommit = lm.CommitTime
		r.lastTx = time.Now()
		return nil
	case *pglogrepl.InsertMessageV2:
		return r.row(chain.OpInsert, lm.RelationID, at, 0, nil, lm.Tuple)
	case *pglogrepl.UpdateMessageV2:
		return r.row(chain.OpUpdate, lm.RelationID, at, lm.OldTupleType, lm.OldTuple, lm.NewTuple)
	case *pglogrepl.DeleteMessageV2:
		return r.row(chain.OpDelete, lm.RelationID, at, lm.OldTupleType, lm.OldTuple, nil)
	case *pglogrepl.TruncateMessageV2:
		return r.truncate(lm, at)
	}
	return nil
}

// relation takes a Relation message: the table's definition as the
// stream now sends it, delivered as a schema change inside a transaction
// when it differs from what the chain records.
func (r *windowRun) relation(ctx context.Context, lm *pglogrepl.RelationMessageV2, at pglogrepl.LSN) error {
	c := r.c
	c.relations[lm.RelationID] = lm
	def, shape, included, err := c.tracker.observe(ctx, lm)
	if err != nil {
		return err
	}
	c.shapes[lm.RelationID], c.skipped[lm.RelationID] = shape, !included
	if def == nil || !r.inTx {
		return nil
	}
	r.ch = chain.Change{Op: chain.OpSchema, XID: r.ch.XID, CommitLSN: r.ch.CommitLSN, Ordinal: r.ordinal, LSN: uint64(at),
		Table: def.QualifiedName(), Schema: def, Identified: true}
	return r.deliver()
}

// row delivers an insert, update or delete of a table the capture keeps.
func (r *windowRun) row(op chain.Op, rel uint32, at pglogrepl.LSN, oldType uint8, old, tuple *pglogrepl.TupleData) error {
	if r.c.skipped[rel] {
		return nil
	}
	if err := r.c.rowChange(&r.ch, op, rel, r.ordinal, at, oldType, old, tuple); err != nil {
		return err
	}
	return r.deliver()
}

// truncate delivers a TRUNCATE of the tables the capture keeps, if any.
func (r *windowRun) truncate(lm *pglogrepl.TruncateMessageV2, at pglogrepl.LSN) error {
	tables := make([]string, 0, len(lm.RelationIDs))
	for _, id := range lm.RelationIDs {
		rel, ok := r.c.relations[id]
		if !ok {
			return fmt.Errorf("truncate of relation %d before its Relation message", id)
		}
		if r.c.skipped[id] {
			continue
		}
		tables = append(tables, rel.Namespace+"."+rel.RelationName)
	}
	if len(tables) == 0 {
		return nil // only tables the filter leaves out
	}
	r.ch = chain.Change{Op: chain.OpTruncate, XID: r.ch.XID, CommitLSN: r.ch.CommitLSN, Ordinal: r.ordinal, LSN: uint64(at),
		Tables: tables, TruncateFlags: lm.Option, Identified: true}
	return r.deliver()
}

// deliver hands the change in r.ch to the sink as the transaction's next.
func (r *windowRun) deliver() error {
	r.ordinal++
	r.w.Changes++
	return r.sink(&r.ch)
}

// rowChange fills ch with an insert, update or delete, its images shaped
// by the relation's filter shape. Values alias the message buffer until the
// next receive, and the value slices are reused by the next change.
func (c *Capture) rowChange(ch *chain.Change, op chain.Op, relID uint32, ordinal uint32, at pglogrepl.LSN, oldKind uint8, old, new *pglogrepl.TupleData) error {
	rel, ok := c.relations[relID]
	if !ok {
		return fmt.Errorf("change to relation %d before its Relation message", relID)
	}
	xid, commit := ch.XID, ch.CommitLSN
	*ch = chain.Change{Op: op, XID: xid, CommitLSN: commit, Ordinal: ordinal, LSN: uint64(at),
		Table: rel.Namespace + "." + rel.RelationName, Identified: true}
	shape := c.shapes[relID]
	if new != nil {
		c.rawNew = tupleValues(c.rawNew[:0], new)
		ch.New = c.rawNew
		if !shape.Trivial() {
			// Project writes into its own buffer, never over the raw image.
			c.newBuf = shape.Project(c.newBuf[:0], c.rawNew)
			ch.New = c.newBuf
		}
	}
	if old != nil {
		ch.OldKind = oldKind
		c.rawOld = tupleValues(c.rawOld[:0], old)
		ch.Old = c.rawOld
		if !shape.Trivial() {
			c.oldBuf = shape.Project(c.oldBuf[:0], c.rawOld)
			ch.Old = c.oldBuf
		}
	}
	return nil
}

func tupleValues(dst []chain.Value, t *pglogrepl.TupleData) []chain.Value {
	for _, col := range t.Columns {
		switch col.DataType {
		case pglogrepl.TupleDataTypeNull:
			dst = append(dst, chain.Value{Kind: chain.ValueNull})
		case pglogrepl.TupleDataTypeToast:
			dst = append(dst, chain.Value{Kind: chain.ValueUnchanged})
		default:
			data := col.Data
			if data == nil {
				data = []byte{}
			}
			dst = append(dst, chain.Value{Kind: chain.ValueText, Data: data})
		}
	}
	return dst
}

// SlotHealth reads the slot's status; a missing or invalidated slot is a
// refusal, since only a new full and slot can recover.
func SlotHealth(ctx context.Context, conn *pgx.Conn, slot string) (source.LogHealth, error) {
	var s source.LogHealth
	err := conn.QueryRow(ctx, `SELECT coalesce(wal_status, ''), coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
			coalesce(confirmed_flush_lsn::text, ''), active
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s.WalStatus, &s.RetainedBytes, &s.Confirmed, &s.Active)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, errSlotMissing(nil, "replication slot %q does not exist on the source", slot)
	}
	if err != nil {
		return s, classify(err, "read slot "+slot)
	}
	s.State = logState(s.WalStatus)
	if s.State == source.LogLost {
		return s, errSlotInvalidated(nil, "PostgreSQL invalidated replication slot %q (wal_status lost): the WAL it needed was removed", slot)
	}
	return s, nil
}

// logState maps pg_replication_slots.wal_status to a log state: reserved
// and extended keep every WAL file the slot needs, unreserved is past
// max_slot_wal_keep_size (its WAL goes at the next checkpoint), lost is gone.
func logState(walStatus string) source.LogState {
	switch walStatus {
	case "unreserved":
		return source.LogAtRisk
	case "lost":
		return source.LogLost
	default:
		return source.LogOK
	}
}

// LogHealth reads the slot's status over the capture's SQL connection.
func (c *Capture) LogHealth(ctx context.Context) (source.LogHealth, error) {
	return SlotHealth(ctx, c.sql, c.o.Slot)
}

// CurrentPosition returns the source's current WAL position.
func (c *Capture) CurrentPosition(ctx context.Context) (string, error) {
	var pos string
	if err := c.sql.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&pos); err != nil {
		return "", classify(err, "read the source position")
	}
	return pos, nil
}
