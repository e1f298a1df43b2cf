package ddlcheck

import (
	"fmt"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// pgOne parses sql with PostgreSQL's own parser and returns the tree of
// its one statement; more or fewer than one statement is an error.
func pgOne(sql string) (*pg_query.ParseResult, error) {
	if strings.ContainsRune(sql, 0) {
		return nil, fmt.Errorf("it holds a NUL byte")
	}
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return nil, fmt.Errorf("it does not parse: %v", err)
	}
	if len(tree.Stmts) != 1 || tree.Stmts[0].Stmt == nil {
		return nil, fmt.Errorf("it is %d statements, not one", len(tree.Stmts))
	}
	tree.Stmts[0].StmtLocation, tree.Stmts[0].StmtLen = 0, 0
	return tree, nil
}

// pgDeparse renders a statement from its parse tree.
func pgDeparse(tree *pg_query.ParseResult) (string, error) {
	out, err := pg_query.Deparse(tree)
	if err != nil {
		return "", fmt.Errorf("it does not render again: %v", err)
	}
	return out, nil
}

// pgDeparseCut renders stmt and returns what lies between prefix and
// suffix: the part a placeholder statement was built around.
func pgDeparseCut(tree *pg_query.ParseResult, prefix, suffix string) (string, error) {
	out, err := pgDeparse(tree)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(out, prefix) || !strings.HasSuffix(out, suffix) || len(out) < len(prefix)+len(suffix) {
		return "", fmt.Errorf("it renders as %q, not in the expected form", out)
	}
	return out[len(prefix) : len(out)-len(suffix)], nil
}

// PGOneStatement reports an error unless sql parses as exactly one
// PostgreSQL statement. The PostgreSQL target checks every DDL statement
// it sends with it, besides sending it over the extended protocol, which
// refuses a second statement too.
func PGOneStatement(sql string) error {
	_, err := pgOne(sql)
	return err
}

// strs returns the string values of a list of String nodes, and false
// when any node is something else.
func strs(nodes []*pg_query.Node) ([]string, bool) {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		s := n.GetString_()
		if s == nil {
			return nil, false
		}
		out[i] = s.Sval
	}
	return out, true
}
