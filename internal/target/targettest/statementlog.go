package targettest

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// The statement-log proofs. An engine's test records every statement its
// target receives (PostgreSQL's log_statement, MariaDB's general log,
// SQLite's driver connection), runs CleanReaders on one target and
// ForgedReaders on another, and requires every statement of the forged run
// to be one the clean run sent too (compared by Shape): refusing a forged
// schema sends nothing a clean schema would not have sent, and nothing of
// the forgery.

// CleanReaders runs, against tgt, every reader of the clean schema Forged
// starts from, as ForgedReaders runs them of the forged one: a restore
// (prepare, table load, finish), a broker applying an incremental with the
// schema, and a broker meeting the table again in a schema change record.
// The schema change record also creates a list-partitioned parent table
// (public.parted), as a forged partition's record does before its forged
// partition is refused and the transaction rolled back. What it sends is
// the expected set of statements.
func CleanReaders(t *testing.T, tgt target.Target) {
	t.Helper()
	ctx := context.Background()
	clean, _ := Forged(Forgeries()[0])
	restore(t, tgt, clean)
	k := &clean.Tables[0]
	ch := chaintest.Store(t)
	plain := chaintest.AddIncremental(t, ch, chaintest.Txn(50, insert(k, "1", "a")), 100)
	if _, err := apply.ApplyIncremental(ctx, ch, plain, clean, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full}); err != nil {
		t.Fatalf("apply with the clean schema: %v", err)
	}
	tb := clean.Tables[0]
	parted := chain.Table{Schema: "public", Name: "parted", PartitionKey: "LIST (id)", Columns: tb.Columns}
	ch2 := chaintest.Store(t)
	change := chaintest.AddIncremental(t, ch2, chaintest.Txn(51,
		chain.Change{Op: chain.OpSchema, Table: tb.QualifiedName(), Schema: &tb},
		chain.Change{Op: chain.OpSchema, Table: parted.QualifiedName(), Schema: &parted}), 100)
	if _, err := apply.ApplyIncremental(ctx, ch2, change, clean, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: plain.ID}); err != nil {
		t.Fatalf("apply the clean schema change record: %v", err)
	}
}

// ForgedReaders runs every reader of f's forged schema against tgt and
// requires each to refuse it with SLUICE-E-CHAIN-SCHEMA-REFUSED: a restore
// (prepare, then the table load of each forged table), a broker starting
// from the forged schema (after a clean restore), and a broker meeting the
// forged tables in a schema change record.
func ForgedReaders(t *testing.T, tgt target.Target, f Forgery) {
	t.Helper()
	ctx := context.Background()
	clean, forged := Forged(f)
	requireCode(t, tgt.Prepare(ctx, forged, false), errcode.ChainSchemaRefused)
	for _, tb := range forged.Tables {
		if b, _ := json.Marshal(tb); !strings.Contains(string(b), "pwned") {
			continue
		}
		_, err := tgt.LoadTable(ctx, chaintest.Store(t), forged, chain.TableData{Table: tb.QualifiedName()}, nil)
		requireCode(t, err, errcode.ChainSchemaRefused)
	}
	restore(t, tgt, clean)
	k := &clean.Tables[0]
	ch := chaintest.Store(t)
	plain := chaintest.AddIncremental(t, ch, chaintest.Txn(50, insert(k, "1", "a")), 100)
	_, err := apply.ApplyIncremental(ctx, ch, plain, forged, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full})
	requireCode(t, err, errcode.ChainSchemaRefused)
	var changes []chain.Change
	for i := range forged.Tables {
		tb := forged.Tables[i]
		tb.Types = forged.Types
		changes = append(changes, chain.Change{Op: chain.OpSchema, Table: tb.QualifiedName(), Schema: &tb})
	}
	ch2 := chaintest.Store(t)
	change := chaintest.AddIncremental(t, ch2, chaintest.Txn(51, changes...), 100)
	_, err = apply.ApplyIncremental(ctx, ch2, change, clean, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full})
	requireCode(t, err, errcode.ChainSchemaRefused)
}

// Hostile names: legal identifiers that would end a statement, open a
// comment or close a quote if a target spliced them unquoted. Each engine
// quotes them and keeps them as the name.
const (
	HostileTableName = `a"; DROP TABLE x; --`
	HostileColumn1   = "b`; DROP TABLE x; --"
	HostileColumn2   = `c'); DROP TABLE x; /*`
	HostileKey       = `id"]; --`
)

// HostileTable is a keyed table whose table, key and column names are the
// hostile names, in schema public.
func HostileTable() chain.Table {
	text := func(name, typ string, oid uint32) chain.Column {
		return chain.Column{Name: name, Type: typ, TypeOID: oid, Encoding: chain.EncodingText}
	}
	id := text(HostileKey, "integer", 23)
	id.NotNull = true
	return chain.Table{Schema: "public", Name: HostileTableName, PrimaryKey: []string{HostileKey},
		Columns: []chain.Column{id, text(HostileColumn1, "text", 25), text(HostileColumn2, "text", 25)}}
}

// HostileNames restores HostileTable with two rows through a table load,
// then has a broker insert, update and delete rows of it, and returns the
// rows the table must then hold, ordered by key, as text.
func HostileNames(t *testing.T, tgt target.Target) (chain.Table, [][]string) {
	t.Helper()
	ctx := context.Background()
	tb := HostileTable()
	s := &chain.Schema{Tables: []chain.Table{tb}}
	if err := tgt.Prepare(ctx, s, false); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	ch := chaintest.Store(t)
	td := chaintest.WriteFull(t, ch, &tb, 100, [][][]byte{
		{[]byte("1"), []byte(`"; DROP TABLE x; --`), []byte("one")},
		{[]byte("2"), []byte("two"), []byte(`'); DROP TABLE x; --`)},
	})
	if n, err := tgt.LoadTable(ctx, ch, s, td, nil); err != nil || n != 2 {
		t.Fatalf("load: %d rows, %v", n, err)
	}
	if err := tgt.Finish(ctx, s); err != nil {
		t.Fatalf("finish: %v", err)
	}
	restorePosition(t, tgt)
	name := tb.QualifiedName()
	m := chaintest.AddIncremental(t, ch, chaintest.Txn(60,
		chain.Change{Op: chain.OpInsert, Table: name, New: chaintest.Text("3", "three", "`; --")},
		chain.Change{Op: chain.OpUpdate, Table: name, New: chaintest.Text("2", "two again", `"]'`)},
		chain.Change{Op: chain.OpDelete, Table: name, OldKind: 'K', Old: chaintest.Text("1", "\x00", "\x00")},
	), 100)
	if _, err := apply.ApplyIncremental(ctx, ch, m, s, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return tb, [][]string{{"2", "two again", `"]'`}, {"3", "three", "`; --"}}
}

var (
	shapeStrings = regexp.MustCompile(`'(?:[^']|'')*'`)
	shapeNumbers = regexp.MustCompile(`\b\d+\b`)
	shapeSpace   = regexp.MustCompile(`\s+`)
	// txnControl is a statement that only begins or ends a transaction:
	// a refused broker transaction rolls back where a clean one commits.
	txnControl = regexp.MustCompile(`(?i)^\s*(begin|commit|rollback|start transaction)( (immediate|deferred|transaction|work))?\s*;?\s*$`)
)

// Shape is a statement with its string literals and numbers blanked and
// its white space folded, so two runs' statements that differ only in
// values (positions, IDs, times) compare equal. The assignments of a
// session's SET a = …, b = … are sorted: a driver sends them in map order.
func Shape(stmt string) string {
	s := shapeStrings.ReplaceAllString(stmt, "'?'")
	s = shapeNumbers.ReplaceAllString(s, "0")
	s = strings.TrimSpace(shapeSpace.ReplaceAllString(s, " "))
	if rest, ok := strings.CutPrefix(s, "SET "); ok && !strings.ContainsAny(rest, "()") {
		parts := strings.Split(rest, ", ")
		slices.Sort(parts)
		s = "SET " + strings.Join(parts, ", ")
	}
	return s
}

// RequireExpected fails unless every statement of got has the Shape of a
// statement of expected (or only begins or ends a transaction), and no
// statement of got names pwned.
func RequireExpected(t *testing.T, expected, got []string) {
	t.Helper()
	known := map[string]bool{}
	for _, s := range expected {
		known[Shape(s)] = true
	}
	for _, s := range got {
		if strings.Contains(strings.ToLower(s), "pwned") {
			t.Errorf("the forged text reached the target: %q", s)
			continue
		}
		if !known[Shape(s)] && !txnControl.MatchString(s) {
			t.Errorf("a statement outside the expected set reached the target: %q", s)
		}
	}
}

// Inert reports why stmt is not one plain statement: with its string
// literals and quoted identifiers ('…', "…", `…`, […]; a doubled quote is part of
// the text; with backslashEscapes, as MySQL reads them, a backslash
// escapes the next byte inside a quoted string) taken out, what is
// left must hold no second statement (a ';' before the end), no comment
// and none of the hostile texts (pwned, DROP TABLE x).
func Inert(stmt string, backslashEscapes bool) error {
	var rest strings.Builder
	for i := 0; i < len(stmt); i++ {
		c := stmt[i]
		closing := map[byte]byte{'\'': '\'', '"': '"', '`': '`', '[': ']'}[c]
		if closing == 0 {
			rest.WriteByte(c)
			continue
		}
		// Skip to the closing quote; a doubled one is part of the text.
		j := i + 1
		for ; j < len(stmt); j++ {
			if backslashEscapes && stmt[j] == '\\' && (closing == '\'' || closing == '"') {
				j++
				continue
			}
			if stmt[j] == closing {
				if closing != ']' && j+1 < len(stmt) && stmt[j+1] == closing {
					j++
					continue
				}
				break
			}
		}
		if j >= len(stmt) {
			return errors.New("an unterminated quote")
		}
		rest.WriteString(" q ")
		i = j
	}
	r := strings.TrimRight(strings.TrimSpace(rest.String()), ";")
	switch {
	case strings.Contains(r, ";"):
		return errors.New("a second statement")
	case strings.Contains(r, "--"), strings.Contains(r, "/*"):
		return errors.New("a comment")
	case strings.Contains(strings.ToLower(r), "pwned"), strings.Contains(r, "DROP TABLE x"):
		return errors.New("hostile text outside a quote")
	}
	return nil
}

// RequireInertNames checks the statements a target received while
// HostileNames ran: every one that carries the hostile names must be
// Inert, and at least one must carry them (else the log missed the
// restore).
func RequireInertNames(t *testing.T, stmts []string, backslashEscapes bool) {
	t.Helper()
	carried := 0
	for _, s := range stmts {
		if !strings.Contains(s, "DROP TABLE x") {
			continue // sluice's own text, carrying nothing of the names
		}
		carried++
		if err := Inert(s, backslashEscapes); err != nil {
			t.Errorf("%v: %q", err, s)
		}
	}
	if carried == 0 {
		t.Error("no logged statement carried the hostile names; the log missed the restore")
	}
}
