package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/filter"
)

// SuppliedColumns returns the columns whose values travel in row chunks:
// every column except stored generated ones, which the target computes.
func SuppliedColumns(t *chain.Table) []chain.Column {
	out := make([]chain.Column, 0, len(t.Columns))
	for _, c := range t.Columns {
		if c.Generated == "" {
			out = append(out, c)
		}
	}
	return out
}

// copyToSQL builds the COPY statement that reads a table's supplied columns
// in binary, casting text-encoded columns to text.
func copyToSQL(t *chain.Table) string {
	cols := SuppliedColumns(t)
	names := make([]string, len(cols))
	cast := false
	for i, c := range cols {
		names[i] = pgx.Identifier{c.Name}.Sanitize()
		if c.Encoding == chain.EncodingText {
			names[i] += "::text"
			cast = true
		}
	}
	rel := QuoteQualified(t.Schema, t.Name)
	if cast {
		return fmt.Sprintf("COPY (SELECT %s FROM ONLY %s) TO STDOUT (FORMAT binary)", strings.Join(names, ", "), rel)
	}
	return fmt.Sprintf("COPY %s (%s) TO STDOUT (FORMAT binary)", rel, strings.Join(names, ", "))
}

// copyTable streams one table out of the snapshot into chunks.
func (b *fullBackup) copyTable(ctx context.Context, tx pgx.Tx, idx int, t *chain.Table) (chain.TableData, error) {
	ncols := len(SuppliedColumns(t))
	sh := b.shapes[t.QualifiedName()]
	w := &chunkSink{
		shape:  sh,
		masked: maskedFields(sh),
		b:      b,
		ctx:    ctx,
		table:  t.QualifiedName(),
		idx:    idx,
		ncols:  ncols,
		limit:  b.o.ChunkBytes,
		bodies: make(chan []byte, 2),
		done:   make(chan error, 1),
	}
	go w.encodeLoop()
	_, copyErr := tx.Conn().PgConn().CopyTo(ctx, w, copyToSQL(t))
	err := w.finish(copyErr)
	if err != nil {
		return chain.TableData{}, err
	}
	return chain.TableData{Table: t.QualifiedName(), Rows: w.rowsTotal, Chunks: w.refs}, nil
}

// chunkSink receives a COPY BINARY stream, cuts it into chunks at tuple
// boundaries, and hands each chunk body to an encoder goroutine so reading
// from PostgreSQL overlaps compressing and uploading.
type chunkSink struct {
	b     *fullBackup
	ctx   context.Context
	table string
	idx   int
	ncols int
	limit int
	// shape masks the table's values when masked (its fields' recorded
	// columns, -1 where unmasked) is set; nil masked costs nothing per
	// tuple.
	shape   *filter.Shape
	masked  []int
	maskBuf []byte

	header  bool
	trailer bool
	pending []byte
	err     error

	bodies    chan []byte
	done      chan error
	refs      []chain.ChunkRef
	rowsTotal int64
}

// Write accepts COPY data as PostgreSQL sends it.
func (s *chunkSink) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.trailer {
		s.err = fmt.Errorf("COPY data after the end-of-data marker")
		return 0, s.err
	}
	s.pending = append(s.pending, p...)
	if !s.header {
		n, err := chain.CopyHeaderLen(s.pending)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return len(p), nil
		}
		if err != nil {
			s.err = err
			return 0, err
		}
		s.pending = append(s.pending[:0:0], s.pending[n:]...)
		s.header = true
	}
	if len(s.pending) >= s.limit {
		if err := s.cut(false); err != nil {
			s.err = err
			return 0, err
		}
	}
	return len(p), nil
}

// cut sends the complete tuples in pending to the encoder; at the end of the
// stream it also checks that only the trailer remains.
func (s *chunkSink) cut(final bool) error {
	complete, _, err := chain.ScanTuples(s.pending, s.ncols)
	trailer := errors.Is(err, chain.ErrCopyTrailer)
	if err != nil && !trailer {
		return err
	}
	if complete > 0 {
		body := s.pending[:complete]
		rest := s.pending[complete:]
		s.pending = make([]byte, len(rest), s.limit+s.limit/4)
		copy(s.pending, rest)
		select {
		case s.bodies <- body:
		case err := <-s.done:
			if err == nil {
				err = fmt.Errorf("chunk encoder stopped early")
			}
			s.done <- err
			return err
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	if trailer {
		if len(s.pending) != 2 {
			return fmt.Errorf("COPY stream has %d bytes after its end-of-data marker", len(s.pending)-2)
		}
		s.trailer = true
	}
	if final && !s.trailer {
		return fmt.Errorf("COPY stream ended without its end-of-data marker (%d bytes of a partial row)", len(s.pending))
	}
	return nil
}

// finish flushes the last chunk and waits for every upload.
func (s *chunkSink) finish(copyErr error) error {
	err := copyErr
	if err == nil && s.err == nil {
		if !s.header {
			err = fmt.Errorf("COPY stream ended before its header")
		} else {
			err = s.cut(true)
		}
	}
	close(s.bodies)
	encErr := <-s.done
	if err != nil {
		return classify(err, "copy "+s.table)
	}
	if s.err != nil {
		return s.err
	}
	return encErr
}

func (s *chunkSink) encodeLoop() {
	var err error
	seq := 0
	for body := range s.bodies {
		if err != nil {
			continue // drain so the reader never blocks
		}
		err = s.encode(seq, body)
		seq++
	}
	s.done <- err
}

func (s *chunkSink) encode(seq int, body []byte) error {
	if s.masked != nil {
		// The original values go no further than this buffer.
		var err error
		if s.maskBuf, err = maskTuples(s.maskBuf[:0], body, s.masked, s.shape); err != nil {
			return fmt.Errorf("chunk %d of %s: %w", seq, s.table, err)
		}
		body = s.maskBuf
	}
	rb := chain.NewRowBuilder(s.table, s.ncols)
	if _, err := rb.AppendTuples(body); err != nil {
		return err
	}
	data, err := rb.Encode()
	if err != nil {
		return fmt.Errorf("encode chunk %d of %s: %w", seq, s.table, err)
	}
	key := fmt.Sprintf("data/%s/%04d-%06d.chunk", s.b.o.AttemptID, s.idx, seq)
	s.b.writtenMu.Lock()
	s.b.written = append(s.b.written, key)
	s.b.writtenMu.Unlock()
	ref, err := s.b.ch.WriteChunk(s.ctx, chain.ChunkPlace{Key: key, Table: s.table, Ordinal: seq}, data, rb.Rows(), int64(len(body)))
	if err != nil {
		return err
	}
	s.refs = append(s.refs, ref)
	s.rowsTotal += rb.Rows()
	s.b.rows.Add(rb.Rows())
	s.b.raw.Add(int64(len(body)))
	s.b.stored.Add(int64(len(data)))
	return nil
}
