package value

import (
	"regexp"
	"strings"
)

var (
	numberLiteral = regexp.MustCompile(`^[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$`)
	stringLiteral = regexp.MustCompile(`^'((?:[^']|'')*)'(?:::[A-Za-z_][A-Za-z0-9_ ."\[\]()]*)?$`)
	nullLiteral   = regexp.MustCompile(`^(?i:null)(?:::[A-Za-z_][A-Za-z0-9_ ."\[\]()]*)?$`)
)

// ConstantDefault reads a PostgreSQL default expression (as pg_get_expr
// prints it) that is a constant — a number, a quoted literal with an
// optional cast, true or false, NULL — into the text form of its value.
// ok is false for anything else.
func ConstantDefault(expr string) (text string, isNull, ok bool) {
	e := strings.TrimSpace(expr)
	for strings.HasPrefix(e, "(") && strings.HasSuffix(e, ")") {
		e = strings.TrimSpace(e[1 : len(e)-1])
	}
	switch {
	case nullLiteral.MatchString(e):
		return "", true, true
	case e == "true" || e == "false":
		return e[:1], false, true
	case numberLiteral.MatchString(e):
		return e, false, true
	}
	if m := stringLiteral.FindStringSubmatch(e); m != nil {
		return strings.ReplaceAll(m[1], "''", "'"), false, true
	}
	return "", false, false
}
