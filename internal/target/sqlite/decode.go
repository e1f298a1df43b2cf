package sqlite

import "github.com/sluicehq/sluice/internal/target/sqlkit"

// valueHint is the hint of a value the target refuses.
const valueHint = "The SQLite target stores each kind by the rules of docs/sqlite-target.md, and this value has no exact form under them. Change the value (or the column's type) on the source, or replicate the table to a target that holds it."

// refuseValue names the table and column of a value the target refuses.
// Other errors pass unchanged.
func refuseValue(table string, c *column, err error) error {
	return sqlkit.RefuseValue(table, c.name, c.decl, err, valueHint)
}
