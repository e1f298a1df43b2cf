package mysql

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// MariaDB keeps the text of its catalog (information_schema, SHOW CREATE
// TABLE) in utf8mb3, which has no four-byte characters: an ENUM or SET
// label, or a default, holding one ('🚀') is shown with '?' in its place,
// although the table itself holds the exact text. The schema read takes
// such text from the table instead: the labels from a variable declared
// with the column's own type, the default through DEFAULT(column). What
// the server cannot give that way is refused by name (SOURCE-TEXT-LOSSY)
// rather than recorded with a '?'.

// lossy reports whether catalog text of a column in character set charset
// may stand for four-byte characters shown as '?': only utf8mb4 text holds
// them.
func lossy(text, charset string) bool {
	return strings.Contains(text, "?") && strings.HasPrefix(strings.ToLower(charset), "utf8mb4")
}

// lossyColumn is a column whose catalog text showed a '?' that may stand
// for a four-byte character: its labels, its default, or both.
type lossyColumn struct {
	tf  *tableFacts
	i   int     // the column's index in tf
	lit *string // the default's literal as the catalog shows it; nil when it is exact
	c   codec   // how the default's value is recorded
}

// readExactText replaces in each lossy column the labels and the default
// the catalog showed with the text the server holds. It is called with no
// result set of q open.
func readExactText(ctx context.Context, q querier, database string, cols []lossyColumn) error {
	var problems []string
	for _, lc := range cols {
		col := &lc.tf.table.Columns[lc.i]
		where := fmt.Sprintf("%s.%s", lc.tf.table.QualifiedName(), col.Name)
		dataType := lc.tf.cols[lc.i].dataType
		labels := enumLabels(col.Type)
		if (dataType == "enum" || dataType == "set") && lossy(strings.Join(labels, ""), lc.tf.cols[lc.i].charset) {
			exact, err := exactLabels(ctx, q, database, lc.tf.table.Name, col.Name, dataType, len(labels))
			me, _ := errors.AsType[*mysql.MySQLError](err)
			switch {
			case err == nil:
			case me != nil && me.Number == erParse, errors.Is(err, errNotExact):
				problems = append(problems, fmt.Sprintf("%s: its %s labels show '?' for four-byte characters and the server gave them no other way (%v)", where, dataType, err))
				continue
			default:
				// The table changed or went meanwhile, or the session
				// failed: not a refusal; the read is tried again.
				return classify(err, "read the labels of "+where)
			}
			labels = exact
			col.Type = dataType + "(" + quotedLabels(labels) + ")"
			if col.Kind.Name == value.Enum {
				col.Kind.Labels = labels
			}
			lc.c.labels = labels
		}
		if lc.lit == nil {
			continue
		}
		lit, ok, err := exactDefault(ctx, q, database, lc.tf.table.Name, col.Name)
		if err != nil {
			return classify(err, "read the default of "+where)
		}
		if !ok && (dataType == "enum" || dataType == "set") {
			lit, ok = defaultAmongLabels(*lc.lit, labels, dataType == "set")
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: its default shows '?' for four-byte characters (%s) and the table has no row to read it through", where, *lc.lit))
			continue
		}
		col.Default = encodeDefault(lit, lc.c)
	}
	if len(problems) > 0 {
		return errcode.New(errcode.SourceTextLossy, "the source shows text with '?' in place of four-byte characters and cannot give it exactly: %s", strings.Join(problems, "; "))
	}
	return nil
}

// errNotExact is what exactLabels read when it is not the labels.
var errNotExact = errors.New("not the column's labels")

// erParse is MySQL's syntax error: a server without MariaDB's compound
// statements or TYPE OF gives it for exactLabels' statement.
const erParse = 1064

// exactLabels reads the n labels of an enum or set column as the server
// holds them: a MariaDB compound statement declares a variable of the
// column's own type (TYPE OF, MariaDB 10.3 and later), gives it each
// label's number (each member's bit, for a set) and collects each label's
// bytes in hex. It takes no privilege beyond reading the table's
// definition and writes nothing.
func exactLabels(ctx context.Context, q querier, database, table, column, dataType string, n int) ([]string, error) {
	assign := "i"
	if dataType == "set" {
		assign = "CAST(1 AS UNSIGNED) << (i - 1)"
	}
	stmt := fmt.Sprintf(`BEGIN NOT ATOMIC
  DECLARE v TYPE OF %s.%s.%s;
  DECLARE i INT UNSIGNED DEFAULT 1;
  DECLARE acc LONGTEXT CHARACTER SET ascii DEFAULT '';
  WHILE i <= %d DO
    SET v = %s;
    SET acc = CONCAT(acc, HEX(v), ',');
    SET i = i + 1;
  END WHILE;
  SELECT acc;
END`, quoteName(database), quoteName(table), quoteName(column), n, assign)
	var acc string
	if err := queryRow(ctx, q, stmt, &acc); err != nil {
		return nil, err
	}
	parts := strings.Split(strings.TrimSuffix(acc, ","), ",")
	if len(parts) != n {
		return nil, fmt.Errorf("%w: read %d labels, want %d", errNotExact, len(parts), n)
	}
	out := make([]string, n)
	for i, p := range parts {
		b, err := hex.DecodeString(p)
		if err != nil || !utf8.Valid(b) {
			return nil, fmt.Errorf("%w: label %d reads as %q, not UTF-8 text", errNotExact, i+1, p)
		}
		out[i] = string(b)
	}
	return out, nil
}

// exactDefault reads a column's default through DEFAULT(column), which
// gives the exact text where the catalog shows '?'. DEFAULT() needs a row
// of the table: the outer join gives one when the table is empty, though
// there only a column that may be NULL reads its default (a NOT NULL
// column reads as NULL); ok is false when no default was read.
func exactDefault(ctx context.Context, q querier, database, table, column string) (string, bool, error) {
	var h sql.NullString
	stmt := fmt.Sprintf("SELECT HEX(DEFAULT(t.%s)) FROM (SELECT 1) AS one LEFT JOIN %s.%s AS t ON TRUE LIMIT 1",
		quoteName(column), quoteName(database), quoteName(table))
	if err := queryRow(ctx, q, stmt, &h); err != nil {
		return "", false, err
	}
	if !h.Valid {
		return "", false, nil
	}
	b, err := hex.DecodeString(h.String)
	if err != nil {
		return "", false, fmt.Errorf("the default reads as %q: %w", h.String, err)
	}
	return string(b), true, nil
}

// defaultAmongLabels finds the exact text of an enum's default (a set's
// members) the catalog showed as shown, among the exact labels: the one
// label whose four-byte characters, each as one '?' or as four, give the
// text shown. ok is false when none or several match.
func defaultAmongLabels(shown string, labels []string, set bool) (string, bool) {
	members := []string{shown}
	if set {
		members = strings.Split(shown, ",")
	}
	out := make([]string, len(members))
	for i, m := range members {
		found := 0
		for _, l := range labels {
			if shownAs(l, m) {
				out[i] = l
				found++
			}
		}
		if found != 1 {
			return "", false
		}
	}
	return strings.Join(out, ","), true
}

// shownAs reports whether utf8mb3 catalog text shown could stand for exact:
// equal but for each four-byte character of exact, shown as one '?' or as
// four.
func shownAs(exact, shown string) bool {
	if exact == "" || shown == "" {
		return exact == shown
	}
	r, n := utf8.DecodeRuneInString(exact)
	if r <= 0xFFFF {
		return strings.HasPrefix(shown, exact[:n]) && shownAs(exact[n:], shown[n:])
	}
	if strings.HasPrefix(shown, "????") && shownAs(exact[n:], shown[4:]) {
		return true
	}
	return strings.HasPrefix(shown, "?") && shownAs(exact[n:], shown[1:])
}
