package apply

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
)

func TestRouterSendsRowChangesByKeyAndBarriersTheRest(t *testing.T) {
	s := testSchema()
	s.Tables = append(s.Tables, chain.Table{Schema: "public", Name: "u",
		Columns:    []chain.Column{{Name: "id", Type: "integer", NotNull: true}, {Name: "code", Type: "text", NotNull: true}, {Name: "v", Type: "text"}},
		PrimaryKey: []string{"id"}, Indexes: []chain.Index{{Name: "u_code", Columns: []string{"code"}, Unique: true}}})
	r := NewRouter(s)
	for _, tc := range []struct {
		name    string
		c       chain.Change
		barrier bool
		key     string
	}{
		{"insert on a keyed table", chain.Change{Op: chain.OpInsert, Table: "public.t", New: chaintest.Text("7", "a")}, false, "7"},
		{"update keeping its key", chain.Change{Op: chain.OpUpdate, Table: "public.t", New: chaintest.Text("7", "b"), OldKind: 'K', Old: chaintest.Text("7", "\x00")}, false, "7"},
		{"update moving the row to another key", chain.Change{Op: chain.OpUpdate, Table: "public.t", New: chaintest.Text("8", "b"), OldKind: 'K', Old: chaintest.Text("7", "\x00")}, true, ""},
		{"delete by key", chain.Change{Op: chain.OpDelete, Table: "public.t", OldKind: 'K', Old: chaintest.Text("7", "\x00")}, false, "7"},
		// A table with a secondary unique index goes to one lane by name: an
		// image may carry either key, and two rows may trade a unique value.
		{"delete by a unique index's columns", chain.Change{Op: chain.OpDelete, Table: "public.u", OldKind: 'K', Old: chaintest.Text("\x00", "c9", "\x00")}, false, "-"},
		{"insert on a table with two unique indexes", chain.Change{Op: chain.OpInsert, Table: "public.u", New: chaintest.Text("7", "c9", "v")}, false, "-"},
		{"keyless table", chain.Change{Op: chain.OpInsert, Table: "public.k", New: chaintest.Text("a", "b")}, true, ""},
		{"unknown table", chain.Change{Op: chain.OpInsert, Table: "public.nope", New: chaintest.Text("a")}, true, ""},
		{"truncate", chain.Change{Op: chain.OpTruncate, Tables: []string{"public.t"}}, true, ""},
		{"schema change", chain.Change{Op: chain.OpSchema, Table: "public.t", Schema: &s.Tables[1]}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, barrier := r.Route(&tc.c)
			if barrier != tc.barrier {
				t.Fatalf("barrier %t, want %t", barrier, tc.barrier)
			}
			if !barrier && tc.key == "-" {
				if len(key) != 0 {
					t.Fatalf("key %q, want the table's lane (no key)", key)
				}
				return
			}
			if !barrier && (len(key) != 1 || string(key[0]) != tc.key) {
				t.Fatalf("key %q, want %q", key, tc.key)
			}
		})
	}
}

// A schema change that gives a keyless table a key lets its rows spread.
func TestRouterFollowsSchemaChanges(t *testing.T) {
	r := NewRouter(testSchema())
	c := chain.Change{Op: chain.OpInsert, Table: "public.k", New: chaintest.Text("a", "b")}
	if _, barrier := r.Route(&c); !barrier {
		t.Fatal("a keyless table's change must be a barrier")
	}
	keyed := chain.Table{Schema: "public", Name: "k", Columns: []chain.Column{{Name: "a", Type: "text", NotNull: true}, {Name: "b", Type: "text"}}, PrimaryKey: []string{"a"}}
	r.Track(&chain.Change{Op: chain.OpSchema, Table: "public.k", Schema: &keyed})
	if key, barrier := r.Route(&c); barrier || string(key[0]) != "a" {
		t.Fatalf("after the key was added: key %q barrier %t", key, barrier)
	}
}

func TestLaneIsStableAndSpreads(t *testing.T) {
	seen := map[int]bool{}
	for i := range 64 {
		k := [][]byte{{byte(i)}}
		l := Lane("public.t", k, 4)
		if l != Lane("public.t", k, 4) {
			t.Fatal("one key maps to two lanes")
		}
		seen[l] = true
	}
	if len(seen) != 4 {
		t.Fatalf("64 keys used %d of 4 lanes", len(seen))
	}
	if Lane("public.t", [][]byte{{1}}, 1) != 0 {
		t.Fatal("one lane must be lane 0")
	}
}
