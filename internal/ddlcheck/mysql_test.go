package ddlcheck

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

// A MySQL-family column may be recorded as identity d (AUTO_INCREMENT) or
// as none; any other identity is a forged schema, refused before a target
// reads it.
func TestCheckForeignIdentity(t *testing.T) {
	table := func(identity string) *chain.Table {
		return &chain.Table{Schema: "shop", Name: "t", Dialect: chain.DialectMySQL, PrimaryKey: []string{"id"},
			Columns: []chain.Column{{Name: "id", Type: "int(11)", NotNull: true, Identity: identity, Encoding: chain.EncodingText}}}
	}
	for _, ok := range []string{"", chain.IdentityByDefault} {
		if err := CheckForeign(table(ok)); err != nil {
			t.Errorf("identity %q: %v", ok, err)
		}
	}
	for _, bad := range []string{chain.IdentityAlways, "x", "d; DROP TABLE t"} {
		refused(t, CheckForeign(table(bad)), "identity", bad)
	}
}
