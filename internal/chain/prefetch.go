package chain

import (
	"context"

	"github.com/sluicehq/sluice/internal/errcode"
)

// FetchedRows is one verified row chunk of a full's table, or the error
// that ended the fetching.
type FetchedRows struct {
	// Key is the chunk's object key, for messages.
	Key string
	// Body holds the chunk's tuples; Rows is how many its header records.
	Body []byte
	Rows int64
	Err  error
}

// PrefetchRows reads td's chunks in order, up to two ahead of the
// consumer, checking that each is a row chunk of ncols columns, so a
// loader decodes and writes one chunk while the next ones are fetched and
// verified. The channel closes after the last chunk or the first error
// (sent as the Err of a last FetchedRows), or when ctx ends.
func PrefetchRows(ctx context.Context, ch *Chain, td TableData, ncols int) <-chan FetchedRows {
	out := make(chan FetchedRows, 2)
	go func() {
		defer close(out)
		for _, ref := range td.Chunks {
			hdr, body, err := ch.ReadChunk(ctx, ref)
			switch {
			case err != nil:
			case hdr.Kind != ChunkKindRows:
				err = errcode.New(errcode.ChunkCorrupt, "chunk %s of table %s is not a row chunk (kind %d)", ref.Key, td.Table, hdr.Kind)
			case hdr.Columns != ncols:
				err = errcode.New(errcode.ChunkCorrupt, "chunk %s has %d columns, table %s stores %d", ref.Key, hdr.Columns, td.Table, ncols)
			}
			select {
			case out <- FetchedRows{Key: ref.Key, Body: body, Rows: hdr.Rows, Err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}
