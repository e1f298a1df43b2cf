package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// PostgreSQL's ADD COLUMN … DEFAULT gives every existing row the default
// without writing a row change to its log, so the chain carries no values
// for those rows: the target must compute them. fillDefaults does, for the
// columns next has that old had not, when the default is a constant; a
// default SQLite cannot compute (a sequence, now(), any other expression)
// on a table that holds rows is refused, never left NULL.
func fillDefaults(ctx context.Context, q execer, old, next *chain.Table, name string) error {
	had := map[string]bool{}
	if old != nil {
		for _, c := range storedColumns(old) {
			had[foldName(c.name)] = true
		}
	}
	for _, c := range next.SuppliedColumns() {
		if had[foldName(c.Name)] || c.Default == "" {
			continue
		}
		text, isNull, ok := value.ConstantDefault(c.Default)
		if isNull {
			continue
		}
		if !ok {
			var one int
			err := q.QueryRowContext(ctx, "SELECT 1 FROM "+quoteIdent(name)+" LIMIT 1").Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				continue // no row to give it to
			}
			if err != nil {
				return classify(err, "look for rows of "+name)
			}
			return errcode.New(errcode.TargetValueRefused,
				"table %s, added column %s: its default %s is not a constant, so SQLite cannot compute the values PostgreSQL gave the rows that exist; nothing of this schema change was applied",
				next.QualifiedName(), c.Name, c.Default)
		}
		col := newColumn(c)
		v, err := value.DecodePGText(col.Kind, []byte(text))
		if err != nil {
			return errcode.New(errcode.TargetValueRefused, "table %s, added column %s: default %s does not read as %s: %v",
				next.QualifiedName(), c.Name, c.Default, col.Kind, err)
		}
		arg, err := render(col.Kind, v)
		if err != nil {
			return refuseValue(next.QualifiedName(), &col, err)
		}
		if _, err := q.ExecContext(ctx, "UPDATE "+quoteIdent(name)+" SET "+col.quoted+" = ?", arg); err != nil {
			return classify(err, fmt.Sprintf("give the rows of %s the default of %s", name, c.Name))
		}
	}
	return nil
}
