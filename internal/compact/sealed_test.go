package compact

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// A compaction of an encrypted, signed chain seals its merged chunks and
// signs its commit: every record reads back the same with the key and
// every generation verifies; without the key the compaction is refused and
// nothing changes.
func TestCompactionOfASealedSignedChain(t *testing.T) {
	ctx := context.Background()
	pass, err := seal.NewPassphrase([]byte("compact"), "test")
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, _, err := seal.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	sk, _ := seal.ParseSigningKey(priv, "k")
	vk, _ := seal.ParseVerifyKey(pub, "k.pub")
	raw := chaintest.Store(t)
	ch := raw.WithKeyring(chain.NewKeyring(chain.Trust{Wrapper: pass, Encrypt: true, Signer: sk}))
	b := chaintest.NewBuilder(t, ch, t0)
	b.PerChunk = 3
	for i := 0; i < 4; i++ {
		b.Incremental(b.Txn(chaintest.Insert(10+i, "sealed"), chaintest.Update(10+i, "again")))
	}
	b.Rotate()
	b.Incremental(b.Txn(chaintest.Insert(99, "open")))
	reader := raw.WithKeyring(chain.NewKeyring(chain.Trust{Wrapper: pass, Verifier: vk, RequireSignature: true}))
	before := recordsOf(t, reader)
	now := func() time.Time { return b.Now }

	// Without the key: refused before anything is written.
	unkeyed := raw.WithKeyring(chain.NewKeyring(chain.Trust{Signer: sk}))
	if _, err := Compact(ctx, unkeyed, Options{ChunkBytes: 300, Now: now}); !errcode.Is(err, errcode.KeyRequired) {
		t.Fatalf("compaction without the key: %v", err)
	}
	// A compactor with the key and the signing key (it seals with a data
	// key of its own).
	compactor := raw.WithKeyring(chain.NewKeyring(chain.Trust{Wrapper: pass, Encrypt: true, Signer: sk}))
	res, err := Compact(ctx, compactor, Options{ChunkBytes: 300, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) != 1 {
		t.Fatalf("result %+v", res.Segments)
	}
	if got := recordsOf(t, reader); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("records changed:\nbefore %v\nafter  %v", before, got)
	}
	cat, err := reader.LoadCatalog(ctx)
	if err != nil || !cat.Signed() {
		t.Fatalf("catalog after the compaction: signed %v, %v", cat.Signed(), err)
	}
	l, err := reader.GetLayout(ctx, cat.Segments[0].Layout)
	if err != nil || l.KeyID == "" {
		t.Fatalf("layout %+v, %v: its merged chunks are sealed", l, err)
	}
}
