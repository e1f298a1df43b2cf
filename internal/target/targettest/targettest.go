// Package targettest is the conformance suite every target engine passes:
// the same cases, through the target.Target interface only, against a real
// database of each engine. An engine's test calls Run with a Harness that
// creates empty targets and reads rows back.
//
// Values are compared by neutral kind: what the engine stores is read back
// as a neutral value and rendered in PostgreSQL's text form, and so is what
// the chain recorded, so two engines' renderings of one value compare equal.
package targettest

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/value"
)

// Harness is what an engine gives the suite.
type Harness struct {
	// New opens a new, empty target (a database or a file of its own); the
	// harness closes it when the test ends.
	New func(t *testing.T) target.Target
	// Read returns the rows of a table ordered by its first column, each
	// value as a neutral value of its column's kind (Null for NULL).
	Read func(t *testing.T, tgt target.Target, table *chain.Table) [][]value.Value
	// Refusal says how the engine treats a value it cannot hold exactly:
	// the code it refuses it with, or "" when it holds it (then the value
	// must come back unchanged).
	Refusal func(kind value.Kind, text string) errcode.Code
	// Pwned reports whether the target holds a table named pwned (in any
	// schema or database the engine maps public to): a forged schema's
	// statement ran. Nil skips that check.
	Pwned func(t *testing.T, tgt target.Target) bool
}

// Run runs every case against the harness's engine.
func Run(t *testing.T, h Harness) {
	t.Run("TypesRoundTripByKind", func(t *testing.T) { typesRoundTrip(t, h) })
	t.Run("SpecialValuesHeldOrRefused", func(t *testing.T) { specialValues(t, h) })
	t.Run("ReappliedInsertUpserts", func(t *testing.T) { reappliedInsert(t, h) })
	t.Run("MarksSkipARedeliveredChange", func(t *testing.T) { marksSkip(t, h) })
	t.Run("MarksRoundTrip", func(t *testing.T) { marksRoundTrip(t, h) })
	t.Run("RowsAndPositionCommitTogether", func(t *testing.T) { commitTogether(t, h) })
	t.Run("UpdatesAndDeletesFindTheirRow", func(t *testing.T) { updatesAndDeletes(t, h) })
	t.Run("KeyJudgments", func(t *testing.T) { keyJudgments(t, h) })
	t.Run("FencedRunRefused", func(t *testing.T) { fenced(t, h) })
	t.Run("NonEmptyTargetRefused", func(t *testing.T) { nonEmpty(t, h) })
	t.Run("ChangesToOneRowKeepTheirOrder", func(t *testing.T) { repeatedKeys(t, h) })
	t.Run("KeyChangeAmongBatchedRows", func(t *testing.T) { keyChange(t, h) })
	t.Run("InterruptedBatchedTransaction", func(t *testing.T) { interruptedBatch(t, h) })
	t.Run("MySQLChainRestoresAndApplies", func(t *testing.T) { mysqlChain(t, h, false) })
	t.Run("MySQLChainRestoresIncrementals", func(t *testing.T) { mysqlChain(t, h, true) })
	t.Run("MySQLChainUint64HeldOrRefused", func(t *testing.T) { mysqlChainRefusesOrHolds(t, h) })
	t.Run("ForgedSchemaRefused", func(t *testing.T) { forgedSchemas(t, h) })
}

const (
	stream = "conformance"
	owner  = "run-1"
	full   = "full-1"
)

// restore creates the schema's tables empty, as a restore of a full
// without rows does, and gives the stream a position after it.
func restore(t *testing.T, tgt target.Target, s *chain.Schema) {
	t.Helper()
	ctx := context.Background()
	if err := tgt.Prepare(ctx, s, false); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	for _, tb := range s.Tables {
		if _, err := tgt.LoadTable(ctx, chaintest.Store(t), s, chain.TableData{Table: tb.QualifiedName()}, nil); err != nil {
			t.Fatalf("load %s: %v", tb.QualifiedName(), err)
		}
	}
	if err := tgt.Finish(ctx, s); err != nil {
		t.Fatalf("finish: %v", err)
	}
	restorePosition(t, tgt)
}

// restorePosition gives the stream a position after the restored full.
func restorePosition(t *testing.T, tgt target.Target) {
	t.Helper()
	ctx := context.Background()
	st := tgt.State()
	if err := st.EnsureControlTables(ctx); err != nil {
		t.Fatal(err)
	}
	row, err := apply.Row(apply.Token{Engine: apply.EngineBroker, Stream: stream, ChainID: "c", LastApplied: full, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReplaceState(ctx, stream, &row); err != nil {
		t.Fatal(err)
	}
}

// applyLinks applies incrementals in order as the broker does, each after
// the one before; it returns the first error.
func applyLinks(t *testing.T, tgt target.Target, s *chain.Schema, ch *chain.Chain, links ...*chain.Manifest) error {
	t.Helper()
	last := full
	for _, m := range links {
		if _, err := apply.ApplyIncremental(context.Background(), ch, m, s, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: last}); err != nil {
			return err
		}
		last = m.ID
	}
	return nil
}

// applyWithOwner applies one incremental as the run named owner.
func applyWithOwner(t *testing.T, tgt target.Target, s *chain.Schema, ch *chain.Chain, m *chain.Manifest, who string) (apply.Result, error) {
	t.Helper()
	return apply.ApplyIncremental(context.Background(), ch, m, s, tgt, apply.Options{Stream: stream, Owner: who, ExpectedLast: full})
}

// position returns the stream's decoded position.
func position(t *testing.T, tgt target.Target) apply.Token {
	t.Helper()
	row, ok, err := tgt.State().ReadState(context.Background(), stream)
	if err != nil || !ok {
		t.Fatalf("read position: found %t, %v", ok, err)
	}
	tok, err := apply.Decode(row.Token, row.Checksum)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// requireCode fails unless err carries code.
func requireCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	if !errcode.Is(err, code) {
		t.Fatalf("want %s, got %v", code, err)
	}
}
