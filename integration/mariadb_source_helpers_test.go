package integration

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluicehq/sluice/internal/chain"
	_ "github.com/sluicehq/sluice/internal/engines" // registers the target engines the readers open
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/value"
)

// mariaSourceSchema is the MariaDB source schema the MySQL-family source
// tests start from: a keyed table, a keyless one, one whose keys change,
// one of many MySQL types, and beat (rows the caught-up wait writes). A
// four-byte character stands in every string position, which MariaDB's
// catalog shows as '?': values, ENUM and SET labels, defaults (and the
// workload's ADD COLUMN fills existing rows with one), a CHECK and comments.
const mariaSourceSchema = `
CREATE TABLE accounts (id bigint PRIMARY KEY, owner varchar(64) NOT NULL, balance decimal(12,2), note text DEFAULT 'n🚀') COMMENT 'accounts 🚀';
CREATE TABLE events (kind varchar(32), payload json);
CREATE TABLE moves (id int PRIMARY KEY, v varchar(600) COMMENT 'v 🚀', CONSTRAINT not_x CHECK (v <> 'x🚀'));
CREATE TABLE beat (id int AUTO_INCREMENT PRIMARY KEY, at datetime(6));
CREATE TABLE typed (
  id int PRIMARY KEY,
  u8 tinyint unsigned, i8 tinyint, u16 smallint unsigned, i16 smallint, i24 mediumint, u24 mediumint unsigned,
  u32 int unsigned, i32 int, i64 bigint, u64 bigint unsigned,
  dec1 decimal(30,10), dec0 decimal(65,0), f4 float, f8 double,
  b1 bit(1), b12 bit(12), b64 bit(64),
  e enum('small','medium','large🚀') DEFAULT 'large🚀', st set('a','b','c🚀') DEFAULT 'a,c🚀',
  js json, dt datetime(6), ts timestamp(6) NULL DEFAULT NULL, tm time(6), y year, d date,
  uu uuid, vb varbinary(64), bl blob, ch char(5), vc varchar(100), tx mediumtext, bo boolean
);
INSERT INTO accounts SELECT seq, CONCAT('owner', seq), seq * 1.5, NULL FROM seq_1_to_2000;
INSERT INTO events SELECT 'seed', JSON_OBJECT('i', seq) FROM seq_1_to_200;
INSERT INTO events SELECT 'dup', '{"same": true}' FROM seq_1_to_20;
INSERT INTO moves SELECT seq, CONCAT('m', seq) FROM seq_1_to_500;
`

// typedColumns are typed's columns after id, in order.
const typedColumns = "u8, i8, u16, i16, i24, u24, u32, i32, i64, u64, dec1, dec0, f4, f8, b1, b12, b64, e, st, js, dt, ts, tm, y, d, uu, vb, bl, ch, vc, tx, bo"

// typedValues are rows of typed's values (after id) at the edges of each
// type; row r of the table takes typedValues[r % len]. The last is all NULL.
var typedValues = []string{
	`0, -128, 0, -32768, -8388608, 0, 0, -2147483648, -9223372036854775808, 0,
	 '-12345678901234567890.0123456789', '-1', 0.5, 0.1, b'0', b'0', 0,
	 'small', '', '{"a": [1, 2.50, {"b": null}], "u": "\\u00e9🚀"}', '1000-01-01 00:00:00', '2001-02-03 04:05:06.654321',
	 '00:00:00', 1901, '1000-01-01', '00000000-0000-0000-0000-000000000000', X'', X'00', '', '', '', 0`,
	`255, 127, 65535, 32767, 8388607, 16777215, 4294967295, 2147483647, 9223372036854775807, 18446744073709551615,
	 '0.0000000001', REPEAT('9', 65), -1.25, 1.7976931348623157e308, b'1', b'101010101010', 0xFFFFFFFFFFFFFFFF,
	 'large🚀', 'a,b,c🚀', '[]', '9999-12-31 23:59:59.999999', '2024-03-31 02:30:00.000001',
	 '23:59:59.999999', 2155, '9999-12-31', 'ffffffff-ffff-ffff-ffff-ffffffffffff', X'DEADBEEF00FF', REPEAT(X'00FF', 3000), 'abcde', 'ünïcødé 🚀', REPEAT('x', 70000), 1`,
	`1, 1, 1, -1, 1, 1, 1, -1, 9007199254740993, 9007199254740993,
	 '0', '123456789012345678901234567890', 16777216, -2.5e-300, b'1', b'1', 1,
	 'medium', 'a,c🚀', '"s"', '2024-02-29 12:34:56.123456', '2038-01-01 00:00:00',
	 '12:34:56.789012', 2024, '2024-02-29', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', X'0A0D5C27', X'', 'ab', 'tab	nl\nquote'' bs\\', 'plain', 1`,
	`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
}

// typedRow is typedValues[r % len]; with signed64, the unsigned 64-bit
// values above 2^63-1 are replaced by 2^63-1, for a target that documents
// refusing them (SQLite).
func typedRow(r int, signed64 bool) string {
	v := typedValues[r%len(typedValues)]
	if signed64 {
		v = strings.NewReplacer("18446744073709551615", "9223372036854775807", "0xFFFFFFFFFFFFFFFF", "0x7FFFFFFFFFFFFFFF").Replace(v)
	}
	return v
}

// typedInsert is an INSERT of typed rows first…first+count-1.
func typedInsert(first, count int, signed64 bool) string {
	var rows []string
	for id := first; id < first+count; id++ {
		rows = append(rows, fmt.Sprintf("(%d, %s)", id, typedRow(id, signed64)))
	}
	return "INSERT INTO typed (id, " + typedColumns + ") VALUES " + strings.Join(rows, ", ")
}

// typedUpdate rewrites typed row id with the values of row id+shift.
func typedUpdate(id, shift int, signed64 bool) string {
	cols := strings.Split(typedColumns, ", ")
	vals := splitTopLevel(typedRow(id+shift, signed64))
	sets := make([]string, len(cols))
	for i, c := range cols {
		sets[i] = c + " = " + vals[i]
	}
	return fmt.Sprintf("UPDATE typed SET %s WHERE id = %d", strings.Join(sets, ", "), id)
}

// splitTopLevel splits a list of SQL values at the commas outside quotes
// and parentheses.
func splitTopLevel(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '\'':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// mariaDB opens one connection to a MariaDB database (by mysql:// URL)
// whose session runs at time zone tz; it closes when the test ends.
func mariaDB(t *testing.T, dsn, tz string) *sql.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := testenv.MySQLAt(t, dsn).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(ctx, "SET time_zone = '"+tz+"'"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// mariaExec runs statements (several, separated by semicolons) in a
// MariaDB database and fails the test on error.
func mariaExec(t *testing.T, dsn, stmts string) {
	t.Helper()
	if _, err := testenv.MySQLAt(t, dsn).ExecContext(context.Background(), stmts); err != nil {
		t.Fatalf("exec in %s: %v\n%s", dsn, err, stmts)
	}
}

// mariaWorkload drives a mix of transactions against a MariaDB source,
// whose sessions run at a zone other than UTC (+05:30: TIMESTAMP values are
// stored in UTC and shown in the session's zone): single- and multi-row,
// key changes, deletes, a keyless table with duplicate rows, the typed
// table, and at fixed steps an ADD COLUMN, a new table and a transaction of
// bigTx rows. signed64 keeps unsigned 64-bit values within 2^63-1 (typedRow).
type mariaWorkload struct {
	dsn      string
	steps    int
	bigTx    int
	pause    time.Duration
	signed64 bool

	stepCounter
}

func (w *mariaWorkload) run(ctx context.Context, t *testing.T) error {
	conn, err := testenv.MySQLAt(t, w.dsn).Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET time_zone = '+05:30'"); err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(42))
	nextID := int64(1_000_000)
	typedID := 1000
	lateRows := 0
	for step := 0; step < w.steps; step++ {
		var stmts []string
		switch {
		case step == w.steps/5:
			stmts = append(stmts, `ALTER TABLE accounts ADD COLUMN score int DEFAULT 0, ADD COLUMN tag varchar(10) NOT NULL DEFAULT 't🚀'`)
		case step == 2*w.steps/5:
			stmts = append(stmts, `CREATE TABLE late (id bigint PRIMARY KEY, v varchar(20), at timestamp(6) NULL DEFAULT NULL, n decimal(9,3))`)
		case step == 3*w.steps/5:
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO accounts (id, owner, balance) SELECT %d + seq, 'bulk', seq FROM seq_1_to_%d`, nextID, w.bigTx))
			nextID += int64(w.bigTx) + 1
		default:
			n := 1 + rng.Intn(5)
			for i := 0; i < n; i++ {
				switch rng.Intn(11) {
				case 0:
					stmts = append(stmts, fmt.Sprintf(`INSERT INTO accounts (id, owner, balance, note) VALUES (%d, 'new%d', %d.25, 'n')`, nextID, step, rng.Intn(1000)))
					nextID++
				case 1:
					stmts = append(stmts, fmt.Sprintf(`UPDATE accounts SET balance = balance + 1, note = 'step %d' WHERE id = %d`, step, 1+rng.Intn(2000)))
				case 2:
					stmts = append(stmts, fmt.Sprintf(`DELETE FROM accounts WHERE id = %d`, 1+rng.Intn(2000)))
				case 3:
					stmts = append(stmts, fmt.Sprintf(`INSERT INTO events VALUES ('k%d', '{"step": %d}'), ('dup', '{"same": true}')`, step, step))
				case 4:
					stmts = append(stmts, `UPDATE events SET payload = JSON_SET(payload, '$.seen', 1) WHERE kind = 'dup' LIMIT 1`)
				case 5:
					stmts = append(stmts, `DELETE FROM events ORDER BY kind LIMIT 1`)
				case 6:
					stmts = append(stmts, fmt.Sprintf(`UPDATE moves SET id = id + 100000, v = CONCAT(v, '>') WHERE id = %d`, 1+rng.Intn(500)))
				case 7:
					stmts = append(stmts, typedInsert(typedID, 1+rng.Intn(3), w.signed64))
					typedID += 4
				case 8:
					stmts = append(stmts, typedUpdate(rng.Intn(40), 1+rng.Intn(3), w.signed64))
				case 9:
					if step > 2*w.steps/5 {
						stmts = append(stmts, fmt.Sprintf(`INSERT INTO late VALUES (%d, 'late', now(6), %d.125)`, lateRows, lateRows))
						lateRows++
					}
				case 10:
					stmts = append(stmts, fmt.Sprintf(`DELETE FROM typed WHERE id = %d`, 1000+rng.Intn(typedID-999)))
				}
			}
		}
		if len(stmts) == 0 {
			continue
		}
		if err := mariaTx(ctx, conn, stmts); err != nil {
			return fmt.Errorf("workload step %d: %w", step, err)
		}
		if err := w.finished(ctx, step, w.pause); err != nil {
			return err
		}
	}
	return nil
}

// mariaTx runs statements in one transaction on conn (DDL commits
// implicitly, as MariaDB does).
func mariaTx(ctx context.Context, conn *sql.Conn, stmts []string) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("%v\n%.300s", err, s)
		}
	}
	return tx.Commit()
}

// binlogPos is a position in a MariaDB binlog: file and offset.
type binlogPos struct {
	file   string
	offset uint64
}

func (p binlogPos) String() string { return fmt.Sprintf("%s:%d", p.file, p.offset) }

// atOrAfter reports whether p is at or after q (binlog files are numbered
// with a fixed width, so their names sort).
func (p binlogPos) atOrAfter(q binlogPos) bool {
	if p.file != q.file {
		return p.file > q.file
	}
	return p.offset >= q.offset
}

// parseChainPosition reads a MySQL-family chain position, "<binlog
// file>:<offset>" and the GTID position after a space.
func parseChainPosition(s string) (binlogPos, error) {
	head, _, _ := strings.Cut(s, " ")
	i := strings.LastIndexByte(head, ':')
	if i < 0 {
		return binlogPos{}, fmt.Errorf("position %q is not <binlog file>:<offset>[ <gtid>]", s)
	}
	off, err := strconv.ParseUint(head[i+1:], 10, 64)
	if err != nil {
		return binlogPos{}, fmt.Errorf("position %q: %v", s, err)
	}
	return binlogPos{file: head[:i], offset: off}, nil
}

// masterPos is the server's current binlog position.
func masterPos(t *testing.T, db *sql.DB) binlogPos {
	t.Helper()
	var p binlogPos
	var doDB, ignoreDB sql.NullString
	if err := db.QueryRowContext(context.Background(), "SHOW MASTER STATUS").Scan(&p.file, &p.offset, &doDB, &ignoreDB); err != nil {
		t.Fatalf("SHOW MASTER STATUS: %v", err)
	}
	return p
}

// waitMariaCaughtUp waits until the chain's tip ends at or after the
// source's binlog position as of a write to beat: every transaction so far
// is committed in the chain. While it waits it writes another beat every
// few seconds, so a producer that ends windows only at a transaction of
// its database has one; the last beat is covered when it returns. It fails
// at once, with the producer's error, when the producer's workflow ended.
func waitMariaCaughtUp(t *testing.T, srcDSN, chainURL string, within time.Duration) {
	t.Helper()
	db := testenv.MySQLAt(t, srcDSN)
	cl := temporalClient(t)
	defer cl.Close()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		if _, err := db.ExecContext(context.Background(), "INSERT INTO beat (at) VALUES (now(6))"); err != nil {
			t.Fatal(err)
		}
		want := masterPos(t, db)
		for wait := time.Now().Add(4 * time.Second); time.Now().Before(wait); time.Sleep(300 * time.Millisecond) {
			_, cat := openChainAt(t, chainURL)
			last = cat.Tip().EndPosition
			at, err := parseChainPosition(last)
			if err != nil {
				t.Fatal(err)
			}
			if at.atOrAfter(want) {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := cl.DescribeWorkflow(ctx, "producer/"+chainURL, "")
		cancel()
		if err != nil || d.RawResponse == nil {
			continue
		}
		if st := d.RawResponse.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := cl.GetWorkflow(ctx, "producer/"+chainURL, "").Get(ctx, nil)
			cancel()
			t.Fatalf("the producer ended (%s) before it caught up with the source; the chain's tip ends at %q: %v",
				st, last, err)
		}
	}
	t.Fatalf("the producer did not catch up with the source within %s; the chain's tip ends at %q", within, last)
}

// mariaNeutralRows returns a reader of a MariaDB source database's tables
// as neutral values: each column read in the server's text form (BIT as
// its number unless the kind is bytes, FLOAT as a DOUBLE; the session at
// UTC, so TIMESTAMP is a UTC instant) and decoded by the column's recorded kind, independently
// of sluice's binlog and snapshot decoders. JSON is compared as parsed
// documents (see normalizeJSON).
func mariaNeutralRows(t *testing.T, srcDSN string) func(*chain.Table) ([][]value.Value, error) {
	t.Helper()
	conn := mariaDB(t, srcDSN, "+00:00")
	ctx := context.Background()
	return func(tb *chain.Table) ([][]value.Value, error) {
		cols := make([]string, len(tb.Columns))
		kinds := make([]value.Kind, len(tb.Columns))
		for j, c := range tb.Columns {
			kinds[j] = c.NeutralKind()
			cols[j] = "`" + strings.ReplaceAll(c.Name, "`", "``") + "`"
			switch typ := strings.ToLower(c.Type); {
			case strings.HasPrefix(typ, "bit") && kinds[j].Name != value.Bytes:
				cols[j] = "CAST(" + cols[j] + " AS UNSIGNED)"
			case strings.HasPrefix(typ, "float"):
				// The text protocol prints a FLOAT to 6 digits; as a
				// DOUBLE it is exact, and parses back to the same float32.
				cols[j] = "CAST(" + cols[j] + " AS DOUBLE)"
			}
		}
		rows, err := conn.QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM `"+strings.ReplaceAll(tb.Name, "`", "``")+"`")
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", tb.Name, err)
		}
		defer rows.Close()
		var out [][]value.Value
		for rows.Next() {
			raw := make([]sql.RawBytes, len(cols))
			dest := make([]any, len(cols))
			for j := range raw {
				dest[j] = &raw[j]
			}
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			vals := make([]value.Value, len(cols))
			for j, b := range raw {
				if b == nil {
					vals[j] = value.Value{Null: true}
					continue
				}
				v, err := mariaTextValue(kinds[j], b)
				if err != nil {
					return nil, fmt.Errorf("source %s.%s = %q (%s, kind %s): %w", tb.Name, tb.Columns[j].Name, b, tb.Columns[j].Type, kinds[j], err)
				}
				vals[j] = v
			}
			out = append(out, normalizeJSON(tb, vals))
		}
		return out, rows.Err()
	}
}

// mariaTextValue decodes MariaDB's text form of a value of kind k.
func mariaTextValue(k value.Kind, b []byte) (value.Value, error) {
	switch k.Name {
	case value.Bytes:
		return value.Value{Bytes: bytes.Clone(b)}, nil
	case value.Bool:
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return value.Value{}, err
		}
		return value.Value{Bool: n != 0}, nil
	case value.TimestampTZ:
		return value.DecodePGText(k, append(bytes.Clone(b), "+00"...))
	}
	return value.DecodePGText(k, b)
}

// normalizeJSON replaces every JSON value of a row by its document
// re-encoded with sorted keys and no insignificant space (numbers kept as
// written): MariaDB keeps a JSON column's text as written, a PostgreSQL
// jsonb target its own rendering of the same document.
func normalizeJSON(tb *chain.Table, row []value.Value) []value.Value {
	for j := range row {
		if row[j].Null || tb.Columns[j].NeutralKind().Name != value.JSON {
			continue
		}
		d := json.NewDecoder(strings.NewReader(row[j].Text))
		d.UseNumber()
		var doc any
		if err := d.Decode(&doc); err != nil {
			continue // compared as text: a difference shows as one
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(doc); err == nil {
			row[j].Text = strings.TrimSuffix(buf.String(), "\n")
		}
	}
	return row
}

// targetNeutralRows returns a reader of a target's tables as neutral
// values through the target engine's own read-back seam (the one sluice
// verify uses), JSON normalised as on the source side.
func targetNeutralRows(t *testing.T, driver, dsn string) func(*chain.Table) ([][]value.Value, error) {
	t.Helper()
	ctx := context.Background()
	tg, err := target.Open(ctx, driver, dsn, nil)
	if err != nil {
		t.Fatalf("open %s target %s: %v", driver, dsn, err)
	}
	t.Cleanup(func() { _ = tg.Close(ctx) })
	rd, ok := tg.(readback.Reader)
	if !ok {
		t.Fatalf("the %s target cannot read its tables back", driver)
	}
	return func(tb *chain.Table) ([][]value.Value, error) {
		snap, err := rd.OpenSnapshot(ctx)
		if err != nil {
			return nil, err
		}
		defer snap.Close(ctx)
		var out [][]value.Value
		err = snap.Scan(ctx, tb, func(row []value.Value) error {
			out = append(out, normalizeJSON(tb, cloneRow(row)))
			return nil
		})
		return out, err
	}
}

func cloneRow(row []value.Value) []value.Value {
	out := make([]value.Value, len(row))
	for i, v := range row {
		v.Bytes = bytes.Clone(v.Bytes)
		out[i] = v
	}
	return out
}

// scratchMariaDB is a mariadbd of a test's own (deploy/dev/scratch-mariadb.sh),
// for settings that must not change on the shared server.
type scratchMariaDB struct {
	t    *testing.T
	dir  string
	port string
	// options are the mariadbd options it was started with, which a
	// crash's restart keeps.
	options []string
}

// startScratchMariaDB starts a scratch server in a temporary folder, with
// the binlog on as a MySQL-family source needs it and any extra mariadbd
// options; it stops when the test ends.
func startScratchMariaDB(t *testing.T, options ...string) *scratchMariaDB {
	t.Helper()
	if _, err := exec.LookPath("mariadbd"); err != nil {
		testenv.Missing(t, "mariadbd is not installed")
	}
	_, port, _ := strings.Cut(freePort(), ":")
	// A short folder: the server's socket path must fit in 108 bytes.
	s := &scratchMariaDB{t: t, dir: t.TempDir(), port: port, options: options}
	s.restart(options...)
	t.Cleanup(func() {
		if out, err := exec.Command("bash", s.script(), "stop", s.dir).CombinedOutput(); err != nil {
			t.Logf("stop the scratch MariaDB: %v\n%s", err, out)
		}
	})
	return s
}

func (s *scratchMariaDB) script() string {
	return filepath.Join("..", "deploy", "dev", "scratch-mariadb.sh")
}

// restart (re)starts the server with extra mariadbd options.
func (s *scratchMariaDB) restart(options ...string) {
	s.t.Helper()
	out, err := exec.Command("bash", append([]string{s.script(), "start", s.dir, s.port}, options...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("start the scratch MariaDB %v: %v\n%s", options, err, out)
	}
}

// dsn is the mysql:// URL of database db on the server as user.
func (s *scratchMariaDB) dsn(user, db string) string {
	return fmt.Sprintf("mysql://%s@127.0.0.1:%s/%s", user, s.port, db)
}
