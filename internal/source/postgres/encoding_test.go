package postgres

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/value"
)

// A built-in type without a neutral decoding of its binary form travels as
// text, so a target of any engine can hold it; the others keep PostgreSQL's
// binary form, the same-engine fast path.
func TestOpaqueBuiltinsTravelAsText(t *testing.T) {
	db := testenv.CreateDB(t, "encoding")
	testenv.Exec(t, db, `CREATE DOMAIN cash AS money;
		CREATE TABLE t (id int PRIMARY KEY, addr inet, addrs inet[], price money, wallet cash, spot point, n numeric(9,2), at timestamptz, tags text[], doc xml, docs xml[])`)
	s, err := readSchemaOf(t, db)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"id": chain.EncodingBinary, "addr": chain.EncodingText, "addrs": chain.EncodingText, "price": chain.EncodingText,
		"wallet": chain.EncodingText, "spot": chain.EncodingText, "n": chain.EncodingBinary, "at": chain.EncodingBinary, "tags": chain.EncodingBinary,
		// xml keeps its binary form, which is its text (value.DecodePGBinary reads it).
		"doc": chain.EncodingBinary, "docs": chain.EncodingBinary,
	}
	for _, c := range s.Tables[0].Columns {
		if c.Encoding != want[c.Name] {
			t.Errorf("column %s (%s, kind %s) travels as %s, want %s", c.Name, c.Type, c.NeutralKind(), c.Encoding, want[c.Name])
		}
		if k := c.NeutralKind(); c.Encoding == chain.EncodingBinary && k.Name == value.Other && c.TypeOID != 142 {
			t.Errorf("column %s of kind other travels in binary", c.Name)
		}
	}
}
