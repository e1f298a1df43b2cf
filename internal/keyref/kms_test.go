package keyref

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
	"github.com/sluicehq/sluice/internal/seal/awskms/kmstest"
)

// A --kms-key reference resolves to the AWS KMS wrapper: a writer's
// keyring wraps its data key with the emulator's key, a reader's opens it,
// and a reader naming another KMS key is refused.
func TestKMSReference(t *testing.T) {
	ep := kmstest.Endpoint(t)
	ctx := context.Background()
	key, other := kmstest.CreateKey(t, ep), kmstest.CreateKey(t, ep)

	var krs Keyrings
	store := chaintest.Store(t)
	ch, err := krs.Open(ctx, store, "file:///kms-chain", Ref{KMSKey: key, KMSEndpoint: ep, Encrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey("a", "c0")}, []byte("rows"), 1, 4); err != nil {
		t.Fatal(err)
	}
	ids, err := store.ListEnvelopes(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("envelopes %v, %v", ids, err)
	}
	env, err := store.ReadEnvelope(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if env.Wrap.Kind != seal.KindAWSKMS {
		t.Fatalf("wrapped by %s", env.Wrap.Kind)
	}
	w, err := Ref{KMSKey: key, KMSEndpoint: ep}.Wrapper(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Open(ctx, w); err != nil {
		t.Fatalf("the reader's KMS reference does not open the writer's key: %v", err)
	}
	w, err = Ref{KMSKey: other, KMSEndpoint: ep}.Wrapper(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Open(ctx, w); !errcode.Is(err, errcode.KeyWrong) {
		t.Fatalf("another KMS key: %v", err)
	}
}
