package sqlite

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
)

// A column PostgreSQL added with a constant default holds it in the rows
// that existed, as on the source (whose log carries no change for them); a
// default SQLite cannot compute is refused on a table with rows.
func TestAddedColumnDefaultsFillExistingRows(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	v1 := chain.Table{Schema: "public", Name: "acc", PrimaryKey: []string{"id"}, Columns: []chain.Column{notNull(col("id", "integer", 23))}}
	applyAll(t, l, chaintest.Txn(1, append(created(v1), ins("public.acc", txt("1")...), ins("public.acc", txt("2")...))...))

	withDefault := func(c chain.Column, def string) chain.Column { c.Default = def; return c }
	v2 := v1
	v2.Columns = append(append([]chain.Column{}, v1.Columns...),
		withDefault(col("score", "integer", 23), "0"),
		withDefault(col("label", "text", 25), "'it''s'::text"),
		withDefault(col("price", "numeric(12,2)", 1700), "(-1.50)"),
		withDefault(col("on", "boolean", 16), "true"),
		withDefault(col("gone", "text", 25), "NULL::text"))
	applyAll(t, l, chaintest.Txn(2, append(created(v2), ins("public.acc", txt("3", "7", "new", "2.00", "f", "\x00")...))...))
	wantRows(t, tg, `SELECT id, score, label, price, "on", quote(gone) FROM acc ORDER BY id`,
		"1|0|it's|-1.50|1|NULL", "2|0|it's|-1.50|1|NULL", "3|7|new|2.00|0|NULL")

	v3 := v2
	v3.Columns = append(append([]chain.Column{}, v2.Columns...), withDefault(col("seq", "bigint", 20), "nextval('acc_seq'::regclass)"))
	for _, c := range chaintest.Txn(3, created(v3)...) {
		if err := l.Apply(context.Background(), &c); err != nil {
			wantCode(t, err, errcode.TargetValueRefused)
			return
		}
	}
	t.Fatal("a sequence default on a table with rows was accepted")
}
