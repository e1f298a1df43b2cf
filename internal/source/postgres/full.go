package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
)

// DefaultChunkBytes is the uncompressed size at which a table's rows are cut
// into a new chunk.
const DefaultChunkBytes = 16 << 20

// FullBackupOptions configure one full backup.
type FullBackupOptions struct {
	// DSN is the source connection string, password resolved.
	DSN string
	// ChainSlot creates the chain's persistent logical replication slot and
	// anchors the snapshot on it; otherwise a temporary slot anchors it.
	ChainSlot bool
	// SlotName names the chain slot; DefaultSlotName(store) when empty.
	SlotName string
	// Publication is the publication incrementals will read; with ChainSlot
	// it is ensured before the slot exists, since pgoutput sees only
	// publications older than the position it decodes. Default
	// DefaultPublication.
	Publication string
	// SetReplicaIdentity is what ChainSlot does about tables the
	// publication would publish without a usable replica identity, whose
	// updates and deletes PostgreSQL would reject from then on:
	// IdentityRefuse (the default) or IdentityAuto.
	SetReplicaIdentity string
	// OnReplicaIdentitySet, when set, is told of each table whose replica
	// identity IdentityAuto changed.
	OnReplicaIdentitySet func(IdentityGap)
	// Parallel is how many tables are copied at once (default 2).
	Parallel int
	// ChunkBytes is the uncompressed size of a chunk (default DefaultChunkBytes).
	ChunkBytes int
	// AttemptID names this attempt's data folder, data/<AttemptID>/.
	AttemptID string
	// Progress, when set, is called about once a second and at the end.
	Progress func(source.Progress)
	// AfterSnapshot, when set, runs once the snapshot is held by every copy
	// connection and before any row is read (tests use it).
	AfterSnapshot func(context.Context) error
	// Now returns the time recorded in the manifest (default time.Now).
	Now func() time.Time
	// Filter decides which tables and columns the full holds and masks
	// values before they are encoded (nil: everything as is). Its refusals
	// come before any slot or publication is created, and the manifest
	// records it.
	Filter *filter.Filter
}

func (o *FullBackupOptions) defaults() error {
	if o.Parallel <= 0 {
		o.Parallel = 2
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AttemptID == "" {
		return errors.New("full backup: attempt ID is required")
	}
	return nil
}

// RotationFull takes a new full of the chain's source for a new segment,
// anchored on a temporary slot at the source's current position. It stores
// the chunks but not the manifest: the producer commits the full together
// with the old segment's closing incremental. cleanup deletes the chunks
// when that commit cannot happen.
func RotationFull(ctx context.Context, ch *chain.Chain, o FullBackupOptions, src chain.SourceInfo) (m *chain.Manifest, cleanup func(), err error) {
	if err := o.defaults(); err != nil {
		return nil, nil, err
	}
	ctl, err := connect(ctx, o.DSN)
	if err != nil {
		return nil, nil, err
	}
	defer ctl.Close(context.Background())
	if err := checkSourceSettings(ctx, ctl); err != nil {
		return nil, nil, err
	}
	if o.Filter != nil {
		// Refuse what the filter cannot do before the temporary slot
		// exists.
		if err := preflightSchema(ctx, ctl, o.Filter); err != nil {
			return nil, nil, err
		}
	}
	m, cleanup, err = takeSnapshot(ctx, ch, o, "sluice_rotate_"+sanitizeSlot(o.AttemptID), true, fixedEncoder(ctx, ctl.PgConn()))
	if err != nil {
		return nil, nil, err
	}
	if m.Source.SystemID != src.SystemID || m.Source.Database != src.Database {
		cleanup()
		return nil, nil, errcode.New(errcode.SourceMismatch, "the source is system %s database %q, the chain was taken from system %s database %q",
			m.Source.SystemID, m.Source.Database, src.SystemID, src.Database)
	}
	m.Source.Slot = src.Slot
	return m, cleanup, nil
}

// DefaultSlotName derives the chain slot's name from the store URL, so a
// retried first full finds its own leftover slot and nobody else's.
func DefaultSlotName(storeURL string) string {
	sum := sha256.Sum256([]byte(storeURL))
	return "sluice_" + hex.EncodeToString(sum[:6])
}

// FullBackup takes a consistent snapshot of every table of the source into
// ch and commits it as the chain's first full. Nothing is named by the
// catalog unless every table was copied; a failed attempt leaves only
// unreferenced objects under data/<AttemptID>/, which it tries to delete.
func FullBackup(ctx context.Context, ch *chain.Chain, o FullBackupOptions) (*chain.Manifest, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := source.RefuseExistingChain(ctx, ch); err != nil {
		return nil, err
	}

	ctl, err := connect(ctx, o.DSN)
	if err != nil {
		return nil, err
	}
	defer ctl.Close(context.Background())
	if err := checkSourceSettings(ctx, ctl); err != nil {
		return nil, err
	}
	if err := preflightSchema(ctx, ctl, o.Filter); err != nil {
		return nil, err
	}

	slot := o.SlotName
	if o.ChainSlot {
		if slot == "" {
			slot = DefaultSlotName(ch.Store().String())
			if err := dropLeftoverSlot(ctx, ctl, slot); err != nil {
				return nil, err
			}
		} else if err := refuseExistingSlot(ctx, ctl, slot); err != nil {
			return nil, err
		}
	} else {
		slot = "sluice_anchor_" + sanitizeSlot(o.AttemptID)
	}

	if o.ChainSlot {
		pub := o.Publication
		if pub == "" {
			pub = DefaultPublication
		}
		// Before the publication exists (or, for an existing one, before
		// the slot makes sluice depend on it): no published table may be
		// left whose updates and deletes would fail in the application.
		if err := checkReplicaIdentity(ctx, ctl, pub, o.SetReplicaIdentity, o.OnReplicaIdentitySet); err != nil {
			return nil, err
		}
		if err := ensurePublication(ctx, ctl, pub); err != nil {
			return nil, err
		}
	}
	committed := false
	if o.ChainSlot {
		defer func() {
			if !committed {
				dropSlotQuietly(ctl, slot)
			}
		}()
	}
	m, cleanup, err := takeSnapshot(ctx, ch, o, slot, !o.ChainSlot, fixedEncoder(ctx, ctl.PgConn()))
	if err != nil {
		return nil, err
	}
	if o.ChainSlot {
		m.Source.Slot = slot
	}
	if err := source.CommitFirstFull(ctx, ch, m, cleanup); err != nil {
		return nil, err
	}
	committed = true
	return m, nil
}

// takeSnapshot creates slot (temporary or not) exporting a snapshot, copies
// every table of that snapshot into chunks, and returns the full's manifest,
// not yet stored, anchored at the slot's consistent point, plus a cleanup
// that deletes the chunks if the caller cannot commit them. With a filter
// it copies only the tables and columns the filter keeps, masked; enc
// casts the filter's fixed values (on a connection outside the snapshot,
// so a refused value cannot abort it).
func takeSnapshot(ctx context.Context, ch *chain.Chain, o FullBackupOptions, slot string, temporary bool, enc filter.FixedEncoder) (*chain.Manifest, func(), error) {
	repl, err := replicationConnect(ctx, o.DSN, ownerAppName(""))
	if err != nil {
		return nil, nil, err
	}
	replOpen := true
	defer func() {
		if replOpen {
			repl.Close(context.Background())
		}
	}()
	sys, err := pglogrepl.IdentifySystem(ctx, repl)
	if err != nil {
		return nil, nil, classify(err, "identify source system")
	}
	created, err := pglogrepl.CreateReplicationSlot(ctx, repl, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		Temporary:      temporary,
		SnapshotAction: "EXPORT_SNAPSHOT",
		Mode:           pglogrepl.LogicalReplication,
	})
	if err != nil {
		return nil, nil, classify(err, "create replication slot "+slot)
	}

	b := &fullBackup{ch: ch, o: o}
	if err := b.openSnapshot(ctx, created.SnapshotName); err != nil {
		return nil, nil, err
	}
	defer b.closeConns()
	// Every copy connection now holds the snapshot itself; the exporting
	// connection may go (a temporary slot goes with it).
	repl.Close(ctx)
	replOpen = false

	schema, oids, shapes, err := readShapedSchema(ctx, b.txs[0], o.Filter, enc)
	if err != nil {
		return nil, nil, classify(err, "read source schema")
	}
	b.shapes = shapes
	if err := checkPrivileges(ctx, b.txs[0], schema, oids); err != nil {
		return nil, nil, err
	}
	if schema.Objects, err = readObjects(ctx, b.txs[0], schema.Tables); err != nil {
		return nil, nil, classify(err, "read source schema objects")
	}
	if o.AfterSnapshot != nil {
		if err := o.AfterSnapshot(ctx); err != nil {
			return nil, nil, err
		}
	}
	tables, err := b.copyAll(ctx, schema, oids)
	if err != nil {
		b.cleanup()
		return nil, nil, err
	}

	m := &chain.Manifest{
		FormatVersion: chain.ManifestFormatVersion,
		Kind:          chain.KindFull,
		Source: chain.SourceInfo{
			Engine:   EngineName,
			SystemID: sys.SystemID,
			Database: sys.DBName,
		},
		StartPosition: created.ConsistentPoint,
		EndPosition:   created.ConsistentPoint,
		CreatedAt:     o.Now().UTC(),
		Schema:        schema,
		Tables:        tables,
		Filters:       o.Filter.Record(),
	}
	for _, t := range tables {
		m.Rows += t.Rows
	}
	return m, b.cleanup, nil
}

func checkSourceSettings(ctx context.Context, conn *pgx.Conn) error {
	var walLevel string
	var canReplicate bool
	err := conn.QueryRow(ctx, `SELECT current_setting('wal_level'), rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&walLevel, &canReplicate)
	if err != nil {
		return classify(err, "read source settings")
	}
	if walLevel != "logical" {
		return errWalLevel(walLevel)
	}
	if !canReplicate {
		return errcode.New(errcode.SourcePrivileges, "the source role may not create replication slots (it lacks REPLICATION)")
	}
	return nil
}

func refuseExistingSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	var active bool
	err := conn.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return classify(err, "look up replication slot "+slot)
	}
	return errcode.New(errcode.SlotExists, "replication slot %q already exists on the source (active=%t)", slot, active)
}

// dropLeftoverSlot removes an inactive slot of this chain's derived name. The
// caller has checked the store holds no chain, so the slot can only be left
// over from an earlier attempt at this same first full.
func dropLeftoverSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	var active bool
	err := conn.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return classify(err, "look up replication slot "+slot)
	}
	if active {
		return errcode.New(errcode.SlotExists, "replication slot %q is in use by another connection", slot)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
		return classify(err, "drop leftover replication slot "+slot)
	}
	return nil
}

func dropSlotQuietly(conn *pgx.Conn, slot string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot)
}

func sanitizeSlot(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return out
}

func checkPrivileges(ctx context.Context, tx pgx.Tx, s *chain.Schema, oids []uint32) error {
	rows, err := tx.Query(ctx, `SELECT o FROM unnest($1::oid[]) o WHERE NOT has_table_privilege(o, 'SELECT')`, oids)
	if err != nil {
		return classify(err, "check table privileges")
	}
	missing := map[uint32]bool{}
	for rows.Next() {
		var o uint32
		if err := rows.Scan(&o); err != nil {
			return classify(err, "check table privileges")
		}
		missing[o] = true
	}
	if err := rows.Err(); err != nil {
		return classify(err, "check table privileges")
	}
	var names []string
	for i, o := range oids {
		if missing[o] {
			names = append(names, s.Tables[i].QualifiedName())
		}
	}
	if len(names) > 0 {
		return errcode.New(errcode.SourcePrivileges, "the source role may not SELECT from %s", strings.Join(names, ", "))
	}
	return nil
}

type fullBackup struct {
	ch    *chain.Chain
	o     FullBackupOptions
	conns []*pgx.Conn
	txs   []pgx.Tx

	rows, raw, stored atomic.Int64
	tablesDone        atomic.Int64
	writtenMu         sync.Mutex
	written           []string
	// shapes are the recorded tables' shapes by qualified name (nil
	// without a filter).
	shapes map[string]*filter.Shape
}

// openSnapshot opens the copy connections, each in a read-only repeatable
// read transaction that imports the exported snapshot.
func (b *fullBackup) openSnapshot(ctx context.Context, snapshot string) error {
	for i := 0; i < b.o.Parallel; i++ {
		conn, err := connect(ctx, b.o.DSN)
		if err != nil {
			return err
		}
		b.conns = append(b.conns, conn)
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return classify(err, "begin snapshot transaction")
		}
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
			return classify(err, "import snapshot "+snapshot)
		}
		b.txs = append(b.txs, tx)
	}
	return nil
}

func (b *fullBackup) closeConns() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tx := range b.txs {
		_ = tx.Rollback(ctx)
	}
	for _, c := range b.conns {
		_ = c.Close(ctx)
	}
}

// cleanup deletes the chunks this attempt wrote; the catalog never named them.
func (b *fullBackup) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.writtenMu.Lock()
	defer b.writtenMu.Unlock()
	for _, k := range b.written {
		_ = b.ch.Store().Delete(ctx, k)
	}
}

func (b *fullBackup) report(total int) {
	if b.o.Progress == nil {
		return
	}
	b.o.Progress(source.Progress{
		TablesTotal: total,
		TablesDone:  int(b.tablesDone.Load()),
		Rows:        b.rows.Load(),
		RawBytes:    b.raw.Load(),
		StoredBytes: b.stored.Load(),
	})
}

// copyAll copies every table, largest first, on Parallel connections.
func (b *fullBackup) copyAll(ctx context.Context, s *chain.Schema, oids []uint32) ([]chain.TableData, error) {
	sizes := make([]int64, len(oids))
	if len(oids) > 0 {
		rows, err := b.txs[0].Query(ctx, `SELECT pg_relation_size(o) FROM unnest($1::oid[]) WITH ORDINALITY u(o, i) ORDER BY i`, oids)
		if err != nil {
			return nil, classify(err, "read table sizes")
		}
		i := 0
		for rows.Next() {
			if err := rows.Scan(&sizes[i]); err != nil {
				return nil, classify(err, "read table sizes")
			}
			i++
		}
		if err := rows.Err(); err != nil {
			return nil, classify(err, "read table sizes")
		}
	}
	// A partitioned table holds no rows of its own: its partitions are
	// copied as the tables they are.
	order := make([]int, 0, len(oids))
	for i := range oids {
		if !s.Tables[i].Partitioned() {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, c int) bool { return sizes[order[a]] > sizes[order[c]] })

	out := make([]chain.TableData, len(s.Tables))
	work := make(chan int)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(b.txs))
	var wg sync.WaitGroup
	for w := range b.txs {
		wg.Add(1)
		go func(tx pgx.Tx) {
			defer wg.Done()
			for i := range work {
				td, err := b.copyTable(ctx, tx, i, &s.Tables[i])
				if err != nil {
					errs <- fmt.Errorf("table %s: %w", s.Tables[i].QualifiedName(), err)
					cancel()
					return
				}
				out[i] = td
				b.tablesDone.Add(1)
			}
		}(b.txs[w])
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				b.report(len(order))
			}
		}
	}()
feed:
	for _, i := range order {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(done)
	b.report(len(order))
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	copied := out[:0]
	for i, td := range out {
		if !s.Tables[i].Partitioned() {
			copied = append(copied, td)
		}
	}
	return copied, nil
}
