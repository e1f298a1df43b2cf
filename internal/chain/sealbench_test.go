package chain

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/seal"
)

// BenchmarkChunkRoundTripSealed writes and reads back an 8 MiB chunk of
// realistic rows through the memory store, plain and sealed, in one run:
// encode (zstd), seal, write, read, check the digest, open, decode. The
// sealed/plain ratio is the cost of encryption on a chunk's whole path.
//
//	go test ./internal/chain/ -run '^$' -bench ChunkRoundTripSealed -benchtime 20x
func BenchmarkChunkRoundTripSealed(b *testing.B) {
	rows, cols := realisticRows(benchTarget)
	w, err := seal.NewPassphrase([]byte("bench"), "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		trust *Keyring
	}{
		{"plain", nil},
		{"sealed", NewKeyring(Trust{Wrapper: w, Encrypt: true})},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			ch := Open(newMemStore()).WithKeyring(c.trust)
			rb := NewRowBuilder("public.orders", cols)
			for _, r := range rows {
				rb.AppendRow(r)
			}
			at := ChunkPlace{Key: DataKey("bench", "0000-000000.chunk"), Table: "public.orders"}
			b.SetBytes(int64(rb.RawLen()))
			b.ResetTimer()
			for b.Loop() {
				data, err := rb.Encode()
				if err != nil {
					b.Fatal(err)
				}
				ref, err := ch.WriteChunk(ctx, at, data, rb.Rows(), int64(rb.RawLen()))
				if err != nil {
					b.Fatal(err)
				}
				if c.trust != nil {
					dk, _ := ch.writeKey(ctx)
					ref.seal = &chunkSeal{keyID: dk.ID, aad: at.aad()}
				}
				if _, _, err := ch.ReadChunk(ctx, ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
