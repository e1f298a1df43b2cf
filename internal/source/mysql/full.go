package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
)

// DefaultChunkBytes is the uncompressed size at which a table's rows are cut
// into a new chunk.
const DefaultChunkBytes = 16 << 20

// defaultParallel is how many chunks are compressed and stored at once.
const defaultParallel = 2

// slotPrefix starts SourceInfo.Slot of a MySQL-family chain, which records
// the replica server ID the chain's binlog is read with.
const slotPrefix = "server_id="

// snapshot copies every table of one consistent snapshot into chunks and
// returns the full's manifest, anchored on the binlog position of that
// snapshot, and a cleanup that deletes the chunks if the caller cannot
// commit them. src, for a rotation, is what the chain records of its
// source; another server or database is refused.
//
// On MariaDB the snapshot takes no lock: START TRANSACTION WITH CONSISTENT
// SNAPSHOT and the binlog_snapshot_file/position status variables give the
// exact binlog position the snapshot sees. MySQL has no such variables:
// there the snapshot is opened under a brief FLUSH TABLES WITH READ LOCK,
// released as soon as the position is read (docs/mysql-source.md).
//
// One connection reads every table, since only one session holds the
// snapshot; o.Parallel chunks are compressed and stored at once.
//
// With o.Filter, the schema is read and shaped once before the snapshot
// (so the filter's refusals come before anything else) and again inside
// it: only the included tables and their kept columns are read, masked
// values are masked as they are encoded, and the manifest records the
// filter.
func (e *engine) snapshot(ctx context.Context, ch *chain.Chain, o source.FullOptions, src *chain.SourceInfo) (*chain.Manifest, func(), error) {
	if o.AttemptID == "" {
		return nil, nil, fmt.Errorf("full backup: attempt ID is required")
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.Parallel <= 0 {
		o.Parallel = defaultParallel
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	db, err := connect(ctx, e.c, 2)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	srv, err := readServer(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	info := chain.SourceInfo{Engine: EngineName, SystemID: srv.systemID, Database: e.c.database}
	// tag names this server in the anchor when it is not the chain's own:
	// a rotation on a server the chain followed a failover to.
	tag := ""
	if src != nil {
		if tag, err = serverTag(*src, info, e.c.followFailover); err != nil {
			return nil, nil, err
		}
		// The chain keeps its identity: every link records the source the
		// chain was taken from.
		info = *src
	} else {
		id := e.c.serverID
		if id == 0 {
			id = derivedServerID(ch.Store().String() + "/" + o.AttemptID)
		}
		info.Slot = slotPrefix + fmt.Sprint(id)
	}
	fixed := newFixedValues(db)
	if o.Filter != nil {
		// The filter's refusals (a key column excluded, a mask the column
		// cannot take) come before the snapshot, its lock and any chunk.
		if _, _, _, err := readShapedSchema(ctx, db, e.c.database, o.Filter, fixed.encoder(ctx)); err != nil {
			return nil, nil, err
		}
	}
	if err := checkLogSettings(ctx, db, srv); err != nil {
		return nil, nil, err
	}
	if err := checkBinlogAccess(ctx, db); err != nil {
		return nil, nil, err
	}
	if src == nil {
		// A new chain's replica ID must be free, and the user must be able
		// to read the binlog. A rotation's producer holds that ID with its
		// own capture right now, and has read the binlog all along.
		id, _ := slotServerID(info.Slot)
		if err := checkServerID(ctx, db, srv, id, ""); err != nil {
			return nil, nil, err
		}
		if err := checkReplication(ctx, e.c, srv, id); err != nil {
			return nil, nil, err
		}
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, classify(err, "connect to the source")
	}
	defer conn.Close()
	anchor, err := openSnapshot(ctx, conn, srv)
	if err != nil {
		return nil, nil, err
	}
	anchor.server = tag
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // the session ends anyway

	var schema *chain.Schema
	var facts map[string]*tableFacts
	var shapes map[string]*filter.Shape
	if o.Filter == nil {
		schema, facts, err = readSchema(ctx, conn, e.c.database)
	} else {
		// Shaped again inside the snapshot: what is copied is what the
		// snapshot sees.
		schema, shapes, facts, err = readShapedSchema(ctx, conn, e.c.database, o.Filter, fixed.encoder(ctx))
	}
	if err != nil {
		return nil, nil, err
	}
	if schema.Objects, err = readObjects(ctx, conn, e.c.database, o.Filter); err != nil {
		return nil, nil, err
	}
	if err := checkSelect(ctx, conn, schema); err != nil {
		return nil, nil, err
	}
	if o.AfterSnapshot != nil {
		if err := o.AfterSnapshot(ctx); err != nil {
			return nil, nil, err
		}
	}
	cp := &copier{ch: ch, o: o, total: len(schema.Tables)}
	tables, err := cp.copyAll(ctx, conn, schema, facts, shapes)
	if err != nil {
		cp.cleanup()
		return nil, nil, err
	}
	m := &chain.Manifest{
		FormatVersion: chain.ManifestFormatVersion,
		Kind:          chain.KindFull,
		Source:        info,
		StartPosition: anchor.String(),
		EndPosition:   anchor.String(),
		CreatedAt:     now().UTC(),
		Schema:        schema,
		Tables:        tables,
		Filters:       o.Filter.Record(),
	}
	for _, t := range tables {
		m.Rows += t.Rows
	}
	return m, cp.cleanup, nil
}

// sameSource refuses a source other than the one the chain records.
func sameSource(chainSrc, got chain.SourceInfo) *errcode.Error {
	if chainSrc.Engine != got.Engine || chainSrc.SystemID != got.SystemID || chainSrc.Database != got.Database {
		return errcode.New(errcode.SourceMismatch, "the chain was taken from %s database %q (server %s); this source is %s database %q (server %s)",
			chainSrc.Engine, chainSrc.Database, chainSrc.SystemID, got.Engine, got.Database, got.SystemID)
	}
	return nil
}

// slotServerID reads the replica server ID a chain records.
func slotServerID(slot string) (uint32, bool) {
	var id uint32
	if _, err := fmt.Sscanf(slot, slotPrefix+"%d", &id); err != nil || id == 0 {
		return 0, false
	}
	return id, true
}

// openSnapshot starts the session's consistent-snapshot transaction and
// returns the binlog position it is consistent with.
func openSnapshot(ctx context.Context, conn *sql.Conn, srv server) (position, error) {
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return position{}, classify(err, "set the snapshot's isolation")
	}
	if !srv.mariadb {
		return openLockedSnapshot(ctx, conn)
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return position{}, classify(err, "start the snapshot")
	}
	var p position
	rows, err := conn.QueryContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return p, classify(err, "read the snapshot's binlog position")
	}
	for rows.Next() {
		var name, val string
		if err := rows.Scan(&name, &val); err != nil {
			rows.Close()
			return p, classify(err, "read the snapshot's binlog position")
		}
		switch strings.ToLower(name) {
		case "binlog_snapshot_file":
			p.file = val
		case "binlog_snapshot_position":
			var off uint64
			fmt.Sscan(val, &off)
			p.offset = uint32(off)
		}
	}
	if err := rows.Close(); err != nil {
		return p, classify(err, "read the snapshot's binlog position")
	}
	if p.file == "" || p.offset == 0 {
		return p, errcode.New(errcode.SourceLogConfig, "the source reports no binlog position for the snapshot (binlog_snapshot_file is empty): is log_bin on?")
	}
	if err := conn.QueryRowContext(ctx, "SELECT COALESCE(BINLOG_GTID_POS(?, ?), '')", p.file, p.offset).Scan(&p.gtid); err != nil {
		return p, classify(err, "read the snapshot's GTID position")
	}
	return p, nil
}

// openLockedSnapshot is MySQL's way to an exact anchor: under FLUSH TABLES
// WITH READ LOCK no transaction commits, so the snapshot started there and
// SHOW MASTER STATUS agree. The lock is held for those two statements
// only, and given up after lockWait rather than queued behind a long
// statement while the application's writes wait behind it.
func openLockedSnapshot(ctx context.Context, conn *sql.Conn) (position, error) {
	var p position
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 5"); err != nil {
		return p, classify(err, "bound the snapshot lock's wait")
	}
	if _, err := conn.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		return p, classify(err, "take the snapshot lock (FLUSH TABLES WITH READ LOCK needs RELOAD)")
	}
	defer conn.ExecContext(context.Background(), "UNLOCK TABLES") //nolint:errcheck // released by the session's end too
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return p, classify(err, "start the snapshot")
	}
	var file string
	var off uint64
	var doDB, ignoreDB, gtid sql.NullString
	if err := conn.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&file, &off, &doDB, &ignoreDB, &gtid); err != nil {
		return p, classify(err, "read the snapshot's binlog position")
	}
	if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		return p, classify(err, "release the snapshot lock")
	}
	return position{file: file, offset: uint32(off), gtid: strings.ReplaceAll(gtid.String, "\n", "")}, nil
}

// checkSelect refuses, naming each, tables the user may not read.
func checkSelect(ctx context.Context, conn *sql.Conn, s *chain.Schema) error {
	var denied []string
	for i := range s.Tables {
		t := &s.Tables[i]
		rows, err := conn.QueryContext(ctx, "SELECT 1 FROM "+quoteTable(t)+" LIMIT 0")
		if err != nil {
			if errcode.Is(classify(err, ""), errcode.SourcePrivileges) {
				denied = append(denied, t.QualifiedName())
				continue
			}
			return classify(err, "read table "+t.QualifiedName())
		}
		rows.Close()
	}
	if len(denied) > 0 {
		return &errcode.Error{Code: errcode.SourcePrivileges, Hint: privilegesHint,
			Message: "the source user may not SELECT from " + strings.Join(denied, ", ")}
	}
	return nil
}

// copier copies tables into row chunks: one reader, o.Parallel encoders.
type copier struct {
	ch    *chain.Chain
	o     source.FullOptions
	total int

	mu      sync.Mutex
	written []string // keys of stored chunks, for cleanup

	done, rows, raw, stored atomic.Int64
}

// cleanup deletes every chunk this attempt stored.
func (cp *copier) cleanup() {
	cp.mu.Lock()
	keys := append([]string(nil), cp.written...)
	cp.mu.Unlock()
	for _, k := range keys {
		_ = cp.ch.Store().Delete(context.Background(), k)
	}
}

func (cp *copier) report() {
	if cp.o.Progress == nil {
		return
	}
	cp.o.Progress(source.Progress{TablesTotal: cp.total, TablesDone: int(cp.done.Load()), Rows: cp.rows.Load(),
		RawBytes: cp.raw.Load(), StoredBytes: cp.stored.Load()})
}

// pending is one chunk waiting to be compressed and stored; its builder
// goes back to free, its table's pool, once stored.
type pending struct {
	table int
	seq   int
	b     *chain.RowBuilder
	free  chan *chain.RowBuilder
}

// copyAll reads every table of s in turn on conn and stores its chunks.
// facts hold each table as the source has it; shapes (nil without a
// filter) how each recorded table crosses.
func (cp *copier) copyAll(ctx context.Context, conn *sql.Conn, s *chain.Schema, facts map[string]*tableFacts, shapes map[string]*filter.Shape) ([]chain.TableData, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]chain.TableData, len(s.Tables))
	for i := range s.Tables {
		out[i].Table = s.Tables[i].QualifiedName()
	}
	refs := make([]map[int]chain.ChunkRef, len(s.Tables))
	for i := range refs {
		refs[i] = map[int]chain.ChunkRef{}
	}
	work := make(chan pending, cp.o.Parallel)
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	var wg sync.WaitGroup
	for range cp.o.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				ref, err := cp.store(ctx, s.Tables[p.table].QualifiedName(), p)
				if err != nil {
					fail(err)
				} else {
					cp.mu.Lock()
					refs[p.table][p.seq] = ref
					cp.mu.Unlock()
				}
				p.b.Reset()
				select {
				case p.free <- p.b:
				default:
				}
			}
		}()
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	readErr := func() error {
		for i := range s.Tables {
			t := &s.Tables[i]
			n, err := cp.copyTable(ctx, conn, i, t, facts[t.Name], shapes[t.QualifiedName()], work, ticker.C)
			if err != nil {
				return fmt.Errorf("table %s: %w", t.QualifiedName(), err)
			}
			out[i].Rows = n
			cp.done.Add(1)
		}
		return nil
	}()
	close(work)
	wg.Wait()
	cp.report()
	if readErr != nil {
		return nil, readErr
	}
	if firstErr != nil {
		return nil, firstErr
	}
	for i := range out {
		for seq := 0; seq < len(refs[i]); seq++ {
			out[i].Chunks = append(out[i].Chunks, refs[i][seq])
		}
	}
	return out, nil
}

// copyTable reads one table through a prepared statement (the binary
// protocol, so FLOAT and DOUBLE arrive as the exact numbers they are) and
// hands its rows to the encoders in chunks. t is the table as the chain
// records it: only its columns are read. sh (nil: none) masks values.
func (cp *copier) copyTable(ctx context.Context, conn *sql.Conn, idx int, t *chain.Table, tf *tableFacts, sh *filter.Shape, work chan<- pending, tick <-chan time.Time) (int64, error) {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = quoteName(c.Name)
	}
	stmt, err := conn.PrepareContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+quoteTable(t))
	if err != nil {
		return 0, classify(err, "prepare the read")
	}
	defer stmt.Close()
	rows, err := stmt.QueryContext(ctx)
	if err != nil {
		return 0, classify(err, "read rows")
	}
	defer rows.Close()
	codecs := keptCodecs(codecsOf(tf), sh)
	if len(codecs) != len(cols) {
		return 0, fmt.Errorf("the table has %d columns to copy and %d decoders", len(cols), len(codecs))
	}
	masked := maskedColumns(sh)
	scanned := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range ptrs {
		ptrs[i] = &scanned[i]
	}
	vals := make([][]byte, len(cols))
	// A table's builders are reused for its next chunks, keeping the
	// buffers they grew.
	free := make(chan *chain.RowBuilder, cp.o.Parallel+1)
	next := func() *chain.RowBuilder {
		select {
		case b := <-free:
			return b
		default:
			return chain.NewRowBuilder(t.QualifiedName(), len(cols))
		}
	}
	b, seq := next(), 0
	var n int64
	flush := func() error {
		select {
		case work <- pending{table: idx, seq: seq, b: b, free: free}:
		case <-ctx.Done():
			return ctx.Err()
		}
		seq++
		b = next()
		return nil
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, classify(err, "read rows")
		}
		for i := range codecs {
			v, err := codecs[i].fromSQL(scanned[i])
			if err != nil {
				return n, errcode.Wrap(errcode.SourceSchemaUnsupported, err, "a value of table %s cannot be carried", t.QualifiedName())
			}
			if v == nil && scanned[i] != nil {
				v = []byte{}
			}
			vals[i] = v
		}
		for _, i := range masked {
			v, null := sh.Cell(i, vals[i], vals[i] == nil)
			switch {
			case null:
				v = nil
			case v == nil:
				v = []byte{} // an empty value, not NULL
			}
			vals[i] = v
		}
		b.AppendRow(vals)
		n++
		cp.rows.Add(1)
		if b.RawLen() >= cp.o.ChunkBytes {
			if err := flush(); err != nil {
				return n, err
			}
		}
		select {
		case <-tick:
			cp.report()
		default:
		}
	}
	if err := rows.Err(); err != nil {
		return n, classify(err, "read rows")
	}
	if b.Rows() > 0 || seq == 0 {
		if err := flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// store compresses and stores one chunk.
func (cp *copier) store(ctx context.Context, table string, p pending) (chain.ChunkRef, error) {
	data, err := p.b.Encode()
	if err != nil {
		return chain.ChunkRef{}, fmt.Errorf("encode a chunk of %s: %w", table, err)
	}
	key := chain.DataKey(cp.o.AttemptID, fmt.Sprintf("%04d-%06d.chunk", p.table, p.seq))
	cp.mu.Lock()
	cp.written = append(cp.written, key)
	cp.mu.Unlock()
	ref, err := cp.ch.WriteChunk(ctx, chain.ChunkPlace{Key: key, Table: table, Ordinal: p.seq}, data, p.b.Rows(), int64(p.b.RawLen()))
	if err != nil {
		return chain.ChunkRef{}, err
	}
	cp.raw.Add(int64(p.b.RawLen()))
	cp.stored.Add(int64(len(data)))
	return ref, nil
}
