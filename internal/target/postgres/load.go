package postgres

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// loadProgress is called after each chunk a table load has sent.
type loadProgress = target.LoadProgress

// loadTable recreates one table and fills it from its chunks in a single
// transaction: drop, create (with owned sequences and CHECK constraints),
// COPY, primary key, indexes, sequence values. A retried load therefore
// starts from scratch and never doubles a row. It returns the rows loaded.
func loadTable(ctx context.Context, conn *pgx.Conn, ch *chain.Chain, s *chain.Schema, td chain.TableData, progress loadProgress) (int64, error) {
	noteForeign(s.Table(td.Table))
	s, err := checkedSchema(s)
	if err != nil {
		return 0, err
	}
	t := s.Table(td.Table)
	if t == nil {
		return 0, fmt.Errorf("table %s has data in the manifest but no recorded schema", td.Table)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, classify(err, "begin load of "+td.Table)
	}
	defer tx.Rollback(context.Background())

	for _, stmt := range createTableSQL(s, t) {
		if err := execDDLTx(ctx, tx, stmt); err != nil {
			return 0, classify(err, "create "+td.Table+": "+stmt)
		}
	}
	rows, err := copyChunks(ctx, tx, ch, t, td, progress)
	if err != nil {
		return 0, err
	}
	if rows != td.Rows {
		return 0, fmt.Errorf("table %s: loaded %d rows, the manifest records %d", td.Table, rows, td.Rows)
	}
	for _, stmt := range finishTableSQL(s, t) {
		if err := execDDLTx(ctx, tx, stmt); err != nil {
			return 0, classify(err, "finish "+td.Table+": "+stmt)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, classify(err, "commit load of "+td.Table)
	}
	return rows, nil
}

func suppliedColumns(t *chain.Table) []chain.Column { return t.SuppliedColumns() }

// createTableSQL drops any table of that name and creates it bare: columns,
// defaults, identity, generated columns, NOT NULL, and the sequences it owns.
func createTableSQL(s *chain.Schema, t *chain.Table) []string {
	rel := ident(t.Schema, t.Name)
	stmts := []string{"DROP TABLE IF EXISTS " + rel + " CASCADE"}
	identity := map[string]chain.Sequence{}
	var owned []chain.Sequence
	for _, q := range s.Sequences {
		if q.OwnedByTable != t.Name || q.Schema != t.Schema {
			continue
		}
		if q.Identity {
			identity[q.OwnedByColumn] = q
			continue
		}
		owned = append(owned, q)
		stmts = append(stmts, "DROP SEQUENCE IF EXISTS "+ident(q.Schema, q.Name)+" CASCADE", createSequenceSQL(q))
	}
	cols := make([]string, 0, len(t.Columns))
	for _, c := range t.Columns {
		def := ident(c.Name) + " " + c.Type
		switch {
		case c.Generated != "":
			def += " GENERATED ALWAYS AS (" + c.Generated + ") STORED"
		case c.Identity != "":
			kind := "BY DEFAULT"
			if c.Identity == "a" {
				kind = "ALWAYS"
			}
			def += " GENERATED " + kind + " AS IDENTITY"
			if q, ok := identity[c.Name]; ok {
				cycle := "NO CYCLE"
				if q.Cycle {
					cycle = "CYCLE"
				}
				def += fmt.Sprintf(" (SEQUENCE NAME %s INCREMENT BY %d MINVALUE %d MAXVALUE %d START WITH %d CACHE %d %s)",
					ident(q.Schema, q.Name), q.Increment, q.Min, q.Max, q.Start, q.Cache, cycle)
			}
		case c.Default != "":
			def += " DEFAULT " + c.Default
		}
		if c.NotNull {
			def += " NOT NULL"
		}
		cols = append(cols, def)
	}
	create := fmt.Sprintf("CREATE TABLE %s (%s)", rel, strings.Join(cols, ", "))
	if t.Partitioned() {
		create += " PARTITION BY " + t.PartitionKey
	}
	stmts = append(stmts, create)
	for _, q := range owned {
		stmts = append(stmts, fmt.Sprintf("ALTER SEQUENCE %s OWNED BY %s.%s", ident(q.Schema, q.Name), rel, ident(q.OwnedByColumn)))
	}
	return stmts
}

// finishTableSQL adds what is cheaper to build after the data: the primary
// key, indexes and UNIQUE constraints, CHECK and EXCLUDE constraints, and the
// values of the table's sequences.
func finishTableSQL(s *chain.Schema, t *chain.Table) []string {
	rel := ident(t.Schema, t.Name)
	var stmts []string
	if len(t.PrimaryKey) > 0 {
		cols := make([]string, len(t.PrimaryKey))
		for i, c := range t.PrimaryKey {
			cols[i] = ident(c)
		}
		name := ""
		if t.PrimaryKeyName != "" {
			name = "CONSTRAINT " + ident(t.PrimaryKeyName) + " "
		}
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ADD %sPRIMARY KEY (%s)", rel, name, strings.Join(cols, ", ")))
	}
	for _, ix := range t.Indexes {
		switch {
		case t.Partitioned() && ix.Constraint != "":
			// A partitioned table takes no constraint USING INDEX: the
			// constraint builds its index, attaching its partitions' own.
			cols := make([]string, len(ix.Columns))
			for i, c := range ix.Columns {
				cols[i] = ident(c)
			}
			stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s UNIQUE (%s)", rel, ident(ix.Constraint), strings.Join(cols, ", ")))
			continue
		case t.Partitioned():
			// The source prints a partitioned index ON ONLY the parent;
			// without ONLY it attaches the partitions' matching indexes.
			stmts = append(stmts, strings.Replace(ix.Definition, " ON ONLY ", " ON ", 1))
			continue
		}
		stmts = append(stmts, ix.Definition)
		if ix.Constraint != "" {
			stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s UNIQUE USING INDEX %s", rel, ident(ix.Constraint), ident(ix.Name)))
		}
	}
	for _, c := range t.Constraints {
		if c.Type == "f" {
			continue // foreign keys wait until every table exists
		}
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", rel, ident(c.Name), c.Definition))
	}
	for _, q := range s.Sequences {
		if q.OwnedByTable != t.Name || q.Schema != t.Schema {
			continue
		}
		stmts = append(stmts, fmt.Sprintf("SELECT setval(%s::regclass, %d, %t)", quoteLiteral(ident(q.Schema, q.Name)), q.LastValue, q.IsCalled))
	}
	return stmts
}

// copyChunks streams a table's chunks into COPY FROM STDIN (FORMAT binary).
// Columns recorded as text are first loaded into a staging table of text
// columns, then cast into the real table by PostgreSQL's own input functions.
func copyChunks(ctx context.Context, tx pgx.Tx, ch *chain.Chain, t *chain.Table, td chain.TableData, progress loadProgress) (int64, error) {
	cols := suppliedColumns(t)
	names := make([]string, len(cols))
	staged := false
	for i, c := range cols {
		names[i] = ident(c.Name)
		if c.Encoding == chain.EncodingText {
			staged = true
		}
	}
	into := ident(t.Schema, t.Name)
	if staged {
		defs := make([]string, len(cols))
		for i, c := range cols {
			typ := c.Type
			if c.Encoding == chain.EncodingText {
				typ = "text"
			}
			defs[i] = ident(c.Name) + " " + typ
		}
		if err := execDDLTx(ctx, tx, "CREATE TEMP TABLE sluice_stage ("+strings.Join(defs, ", ")+") ON COMMIT DROP"); err != nil {
			return 0, classify(err, "create staging table for "+td.Table)
		}
		into = "pg_temp.sluice_stage"
	}

	src := newChunkStream(ctx, ch, td, len(cols), progress)
	defer src.close()
	_, err := tx.Conn().PgConn().CopyFrom(ctx, src, fmt.Sprintf("COPY %s (%s) FROM STDIN (FORMAT binary)", into, strings.Join(names, ", ")))
	if src.err != nil {
		return 0, src.err
	}
	if err != nil {
		return 0, classify(err, "copy into "+td.Table)
	}
	if staged {
		sel := make([]string, len(cols))
		for i, c := range cols {
			sel[i] = ident(c.Name)
			if c.Encoding == chain.EncodingText {
				sel[i] += "::" + c.Type
			}
		}
		sql := fmt.Sprintf("INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM pg_temp.sluice_stage", ident(t.Schema, t.Name), strings.Join(names, ", "), strings.Join(sel, ", "))
		if err := execDDLTx(ctx, tx, sql); err != nil {
			return 0, classify(err, "move staged rows into "+td.Table)
		}
		if err := execDDLTx(ctx, tx, "DROP TABLE pg_temp.sluice_stage"); err != nil {
			return 0, classify(err, "drop staging table")
		}
	}
	return src.rows, nil
}

// chunkStream is an io.Reader producing a COPY BINARY stream from a table's
// chunks: the header, each chunk's tuples, and the end-of-data marker. A
// goroutine fetches and verifies chunks ahead of the reader.
type chunkStream struct {
	ctx      context.Context
	cancel   context.CancelFunc
	bodies   chan fetchedChunk
	errs     chan error
	cur      []byte
	stage    int // 0 header, 1 bodies, 2 trailer, 3 done
	rows     int64
	err      error
	progress loadProgress
	td       chain.TableData
}

// fetchedChunk is one verified chunk body and its row count.
type fetchedChunk struct {
	body []byte
	rows int64
}

func newChunkStream(ctx context.Context, ch *chain.Chain, td chain.TableData, ncols int, progress loadProgress) *chunkStream {
	ctx, cancel := context.WithCancel(ctx)
	s := &chunkStream{ctx: ctx, cancel: cancel, bodies: make(chan fetchedChunk, 2), errs: make(chan error, 1), progress: progress, td: td}
	go func() {
		defer close(s.bodies)
		for _, ref := range td.Chunks {
			hdr, body, err := ch.ReadChunk(ctx, ref)
			if err == nil && hdr.Kind != chain.ChunkKindRows {
				err = errcode.New(errcode.ChunkCorrupt, "chunk %s of table %s is not a row chunk (kind %d)", ref.Key, td.Table, hdr.Kind)
			}
			if err == nil && hdr.Columns != ncols {
				err = fmt.Errorf("chunk %s has %d columns, table %s has %d", ref.Key, hdr.Columns, td.Table, ncols)
			}
			if err != nil {
				s.errs <- err
				return
			}
			select {
			case s.bodies <- fetchedChunk{body: body, rows: hdr.Rows}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// Read implements io.Reader.
func (s *chunkStream) Read(p []byte) (int, error) {
	for len(s.cur) == 0 {
		switch s.stage {
		case 0:
			s.cur = chain.AppendCopyHeader(nil)
			s.stage = 1
		case 1:
			select {
			case c, ok := <-s.bodies:
				if !ok {
					select {
					case err := <-s.errs:
						s.err = err
						return 0, err
					default:
					}
					s.cur = chain.AppendCopyTrailer(nil)
					s.stage = 2
					continue
				}
				s.cur = c.body
				s.rows += c.rows
				if s.progress != nil {
					s.progress(c.rows, int64(len(c.body)))
				}
			case err := <-s.errs:
				s.err = err
				return 0, err
			case <-s.ctx.Done():
				s.err = s.ctx.Err()
				return 0, s.err
			}
		case 2:
			s.stage = 3
			return 0, io.EOF
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

func (s *chunkStream) close() { s.cancel() }
