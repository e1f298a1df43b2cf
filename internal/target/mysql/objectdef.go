package mysql

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// A MySQL-family object's recorded definition (internal/source/mysql
// objects.go writes it) is the server's SHOW CREATE text without its
// DEFINER clause, ending in ";", after SET lines for the sql_mode it was
// stored with and an event's time zone. The chain is data: before a text
// is sent it must read as exactly that — the SET lines with values of
// their own grammar (re-rendered, never sent as written), then one CREATE
// of the object's own kind, under the object's own unqualified name (and
// a trigger on its own table), which is sent alone on a connection that
// does not take several statements in one call. A table comment is read
// as its value and rendered again.

// identRe is one identifier: back-quoted, or bare letters, digits, _ and $.
const identRe = "(?:`(?:[^`]|``)+`|[\\p{L}\\p{N}_$]+)"

var (
	sessionLine = regexp.MustCompile(`^SET (sql_mode|time_zone) = '((?:[^'\\]|'')*)';\n`)
	sqlModeText = regexp.MustCompile(`^[A-Z_,]*$`)
	zoneText    = regexp.MustCompile(`^[A-Za-z0-9_/+:.-]*$`)

	viewText = regexp.MustCompile(`(?is)^CREATE\s+(ALGORITHM\s*=\s*(?:UNDEFINED|MERGE|TEMPTABLE)\s+)?((?:SQL\s+SECURITY\s+(?:DEFINER|INVOKER)\s+)?VIEW\s+(` +
		identRe + `)(?:\s*\(\s*` + identRe + `(?:\s*,\s*` + identRe + `)*\s*\))?\s+AS\s.+)$`)
	functionText  = regexp.MustCompile(`(?is)^CREATE\s+((?:AGGREGATE\s+)?FUNCTION\s+(` + identRe + `)\s*\(.+)$`)
	procedureText = regexp.MustCompile(`(?is)^CREATE\s+(PROCEDURE\s+(` + identRe + `)\s*\(.+)$`)
	triggerText   = regexp.MustCompile(`(?is)^CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?(` + identRe +
		`)(\s+(?:BEFORE|AFTER)\s+(?:INSERT|UPDATE|DELETE)\s+ON\s+)(` + identRe + `)(\s+(?:(?:FOLLOWS|PRECEDES)\s+` + identRe +
		`\s+)?FOR\s+EACH\s+ROW\s+)(.+)$`)
	eventText   = regexp.MustCompile(`(?is)^CREATE\s+EVENT\s+(?:IF\s+NOT\s+EXISTS\s+)?(` + identRe + `)(\s+ON\s+SCHEDULE\s.+)$`)
	eventStatus = regexp.MustCompile(`(?is)(\sON\s+COMPLETION\s+(?:NOT\s+)?PRESERVE\s+)(ENABLE|DISABLE\s+ON\s+(?:SLAVE|REPLICA)|DISABLE)(\s)`)
	commentText = regexp.MustCompile("(?s)^ALTER TABLE (" + identRe + ") COMMENT = '((?:[^'\\\\]|''|\\\\.)*)'$")
)

// objectDef is a recorded definition read: the session settings, and the
// CREATE text around the place its DEFINER clause goes.
type objectDef struct {
	obj               chain.Object
	sqlMode, timeZone *string
	// name is the object's name (a comment's: its table's).
	name string
	// pre and post are the CREATE text before and after DEFINER (without
	// CREATE itself); a trigger's body is apart, in body.
	pre, post, body string
	// comment is a table comment's text.
	comment string
}

// readObjectDef reads a recorded definition, refusing one that is not
// what the MySQL-family source records for its kind and name.
func readObjectDef(ob chain.Object) (*objectDef, error) {
	d := &objectDef{obj: ob}
	text := ob.Definition
	for {
		m := sessionLine.FindStringSubmatch(text)
		if m == nil {
			break
		}
		v := strings.ReplaceAll(m[2], "''", "'")
		switch {
		case m[1] == "sql_mode" && d.sqlMode == nil && sqlModeText.MatchString(v):
			d.sqlMode = &v
		case m[1] == "time_zone" && d.timeZone == nil && ob.Kind == chain.ObjectEvent && zoneText.MatchString(v):
			d.timeZone = &v
		default:
			return nil, refuseObject(ob, "its %s line is not one sluice records", m[1])
		}
		text = text[len(m[0]):]
	}
	stmt, ok := strings.CutSuffix(strings.TrimRight(text, " \t\r\n"), ";")
	if !ok {
		return nil, refuseObject(ob, "it does not end its statement with ;")
	}
	name, err := recordedName(ob)
	if err != nil {
		return nil, err
	}
	d.name = name
	var m []string
	switch ob.Kind {
	case chain.ObjectComment:
		if m = commentText.FindStringSubmatch(stmt); m == nil || unquoteIdent(m[1]) != name {
			return nil, refuseObject(ob, "it is not ALTER TABLE %s COMMENT = '…'", quoteIdent(name))
		}
		d.comment = unquoteLiteral(m[2])
		return d, nil
	case chain.ObjectView:
		if m = viewText.FindStringSubmatch(stmt); m == nil || unquoteIdent(m[3]) != name {
			return nil, refuseObject(ob, "it is not one CREATE VIEW %s", quoteIdent(name))
		}
		d.pre, d.post = m[1], m[2]
	case chain.ObjectFunction, chain.ObjectProcedure:
		re := functionText
		if ob.Kind == chain.ObjectProcedure {
			re = procedureText
		}
		if m = re.FindStringSubmatch(stmt); m == nil || unquoteIdent(m[2]) != name {
			return nil, refuseObject(ob, "it is not one CREATE %s %s", strings.ToUpper(string(ob.Kind)), quoteIdent(name))
		}
		d.post = m[1]
	case chain.ObjectTrigger:
		_, table, _ := strings.Cut(ob.Table, ".")
		if m = triggerText.FindStringSubmatch(stmt); m == nil || unquoteIdent(m[1]) != name || unquoteIdent(m[3]) != table {
			return nil, refuseObject(ob, "it is not one CREATE TRIGGER %s on %s", quoteIdent(name), quoteIdent(table))
		}
		d.post, d.body = "TRIGGER "+m[1]+m[2]+m[3]+m[4], m[5]
	case chain.ObjectEvent:
		if m = eventText.FindStringSubmatch(stmt); m == nil || unquoteIdent(m[1]) != name || !eventStatus.MatchString(m[2]) {
			return nil, refuseObject(ob, "it is not one CREATE EVENT %s with its status", quoteIdent(name))
		}
		d.post = "EVENT " + m[1] + m[2]
	default:
		return nil, refuseObject(ob, "a MySQL-family target has no such object")
	}
	return d, nil
}

// withDefiner is the CREATE text (without CREATE) run as definer.
func (d *objectDef) withDefiner(definer string) string {
	return d.pre + "DEFINER = " + definer + " " + d.post
}

// disabled is d, an event, with its status set to status.
func (d *objectDef) disabled(status string) string {
	loc := eventStatus.FindStringSubmatchIndex(d.post)
	return d.post[:loc[4]] + status + d.post[loc[5]:]
}

// unquoteIdent reads a possibly back-quoted identifier.
func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// unquoteLiteral reads the inside of a MySQL string literal: a quote
// doubled or escaped, and the backslash escapes.
func unquoteLiteral(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case '0':
				c = 0
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'Z':
				c = 26
			case 'b':
				c = '\b'
			case '%', '_':
				b.WriteByte('\\')
				c = s[i]
			default:
				c = s[i]
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// refuseObject refuses a recorded object's text with
// SLUICE-E-CHAIN-SCHEMA-REFUSED.
func refuseObject(ob chain.Object, format string, args ...any) error {
	shown := ob.Definition
	if len(shown) > 200 {
		shown = shown[:200] + "…"
	}
	return errcode.New(errcode.ChainSchemaRefused, "the chain's recorded %s %s is refused: %s; recorded text %q",
		ob.Kind, ob.Name, fmt.Sprintf(format, args...), shown)
}
