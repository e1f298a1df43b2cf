package ddlcheck

import (
	"fmt"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Expression contexts.
const (
	// InDefault is a column or domain default: no column references.
	InDefault = false
	// WithColumns is a generation, CHECK, index or partition expression,
	// which may name the table's columns.
	WithColumns = true
)

const pgExprPrefix = "SELECT "

// PGExpr checks a recorded PostgreSQL expression (a default, a generation
// expression) and returns it rendered again from its parse tree,
// parenthesized so it reads as one operand wherever it is put. It must
// parse as exactly one expression built of pgExprNodes, calling only
// allowlisted functions (pgSafeFuncs, pgExtensionFuncs, nextval of a
// constant), and naming columns only where columns is WithColumns.
func PGExpr(w Where, text string, names *Names, columns bool) (string, error) {
	out, err := pgExpr(text, names, columns)
	if err != nil {
		return "", refuse(w, text, "%v", err)
	}
	return out, nil
}

func pgExpr(text string, names *Names, columns bool) (string, error) {
	tree, err := pgOne(pgExprPrefix + text)
	if err != nil {
		return "", err
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil || len(sel.TargetList) != 1 || len(sel.FromClause) > 0 || sel.WhereClause != nil ||
		len(sel.GroupClause) > 0 || sel.HavingClause != nil || len(sel.WindowClause) > 0 || len(sel.ValuesLists) > 0 ||
		len(sel.SortClause) > 0 || sel.LimitCount != nil || sel.LimitOffset != nil || len(sel.LockingClause) > 0 ||
		sel.WithClause != nil || sel.Op != pg_query.SetOperation_SETOP_NONE || len(sel.DistinctClause) > 0 || sel.IntoClause != nil {
		return "", fmt.Errorf("it is not one expression")
	}
	rt := sel.TargetList[0].GetResTarget()
	if rt == nil || rt.Name != "" || len(rt.Indirection) > 0 || rt.Val == nil {
		return "", fmt.Errorf("it is not one expression")
	}
	if err := pgCheckExpr(rt.Val, names, columns); err != nil {
		return "", err
	}
	out, err := pgDeparseCut(tree, pgExprPrefix, "")
	if err != nil {
		return "", err
	}
	return "(" + out + ")", nil
}

// pgCheckExpr walks one parsed expression.
func pgCheckExpr(n *pg_query.Node, names *Names, columns bool) error {
	if n == nil {
		return nil
	}
	w := &pgWalker{names: names, nodes: pgExprNodes, columns: columns}
	return w.walk(n.ProtoReflect())
}
