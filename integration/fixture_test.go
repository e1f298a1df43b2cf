package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	// Tests reach the real PostgreSQL to build databases, workloads and comparisons.
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/testenv"
)

// typesFixture creates eleven tables covering the types a backup must carry
// exactly, NULLs in every column, a table without a key, a table of 200k
// rows, a second schema, identity and serial keys and a foreign key.
const typesFixture = `
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'très bien');
CREATE SCHEMA "Other Schema";

CREATE TABLE ints (id int8 PRIMARY KEY, a int2, b int4, c int8);
INSERT INTO ints VALUES
  (1, 32767, 2147483647, 9223372036854775807),
  (2, -32768, -2147483648, -9223372036854775808),
  (3, 0, 0, 9007199254740993),          -- 2^53 + 1: not representable as a float64
  (4, NULL, NULL, NULL),
  (9007199254740995, 1, 2, -9007199254740993);

CREATE TABLE nums (id int PRIMARY KEY, n numeric(40,20), free numeric, f8 float8, f4 float4);
INSERT INTO nums VALUES
  (1, 12345678901234567890.12345678901234567890, 'NaN', 'NaN', 'NaN'),
  (2, -0.00000000000000000001, 1e-100, 'Infinity', 'Infinity'),
  (3, 0, 123456789012345678901234567890.5, '-Infinity', '-Infinity'),
  (4, NULL, NULL, NULL, NULL),
  (5, 1.5, -0, 2.2250738585072014e-308, 1.17549435e-38),
  (6, 99999999999999999999.99999999999999999999, 1, 1.7976931348623157e308, -0.0);

CREATE TABLE texts (id int PRIMARY KEY, t text, v varchar(20), c char(5), e text);
INSERT INTO texts VALUES
  (1, 'plain', 'v', 'c', ''),
  (2, 'ünïcødé — 日本語 — 🐘 — עברית', 'emoji 🎉', 'ab', ' '),
  (3, E'tab\tnewline\nquote''backslash\\', 'x', NULL, ''),
  (4, NULL, NULL, NULL, NULL),
  (5, repeat('long text ', 5000), '', '', 'not empty');

CREATE TABLE blobs (id int PRIMARY KEY, b bytea, empty bytea);
INSERT INTO blobs VALUES
  (1, '\x00ff10', ''),
  (2, decode(repeat('deadbeef', 10000), 'hex'), NULL),
  (3, NULL, NULL);

CREATE TABLE times (id int PRIMARY KEY, d date, ts timestamp, tz timestamptz, iv interval, tm time, tmz timetz);
INSERT INTO times VALUES
  (1, '2024-02-29', '2024-02-29 23:59:59.999999', '2024-02-29 23:59:59.999999+05:30', '1 year 2 mons 3 days 04:05:06.789', '12:34:56.5', '12:00+02'),
  (2, '0001-01-01 BC', '1900-01-01 00:00:00', '1970-01-01 00:00:00+00', '-3 days', '00:00', '23:59:59-07'),
  (3, 'infinity', '-infinity', 'infinity', '0', '24:00', '00:00+00'),
  (4, NULL, NULL, NULL, NULL, NULL, NULL);

CREATE TABLE docs (id uuid PRIMARY KEY, j json, jb jsonb, ok bool);
INSERT INTO docs VALUES
  ('00000000-0000-0000-0000-000000000001', '{"b": 1, "a": [1, 2.50, "x"]}', '{"b": 1, "a": [1, 2.50, "x"], "n": null}', true),
  ('ffffffff-ffff-ffff-ffff-ffffffffffff', '  [ "spacing kept" ]', '"just a string"', false),
  ('12345678-1234-5678-1234-567812345678', '{"big": 123456789012345678901234567890}', '{"big": 123456789012345678901234567890, "u": "ü"}', NULL),
  ('00000000-0000-0000-0000-000000000004', NULL, NULL, NULL);

CREATE TABLE arrays (id int PRIMARY KEY, ia int[], ta text[], na numeric[], moods mood[], grid int[][], nul int[]);
INSERT INTO arrays VALUES
  (1, '{1,2,3}', '{"a","b c","ü",NULL}', '{1.5,NaN}', '{sad,"très bien"}', '{{1,2},{3,4}}', '{NULL}'),
  (2, '{}', '{}', '{}', '{}', '{}', '{}'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL);

CREATE TABLE enums (id int PRIMARY KEY, m mood NOT NULL, maybe mood);
INSERT INTO enums VALUES (1, 'sad', NULL), (2, 'très bien', 'ok');

CREATE TABLE nokey (a int, b text, c float8);
INSERT INTO nokey VALUES (1, 'dup', 1), (1, 'dup', 1), (NULL, NULL, NULL), (2, '', 'NaN');

CREATE TABLE serials (id serial PRIMARY KEY, v text UNIQUE, code int GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 5), twice int GENERATED ALWAYS AS (id * 2) STORED);
INSERT INTO serials (v) SELECT 'v' || i FROM generate_series(1, 50) i;
DELETE FROM serials WHERE id > 45;

CREATE TABLE big (id bigint PRIMARY KEY, payload text NOT NULL, amount numeric(12,2), at timestamptz, flag bool, serial_ref int REFERENCES serials(id));
INSERT INTO big SELECT i, md5(i::text) || repeat('x', i % 50), (i % 100000) / 100.0, '2020-01-01'::timestamptz + i * interval '1 second', i % 3 = 0, 1 + i % 45
  FROM generate_series(1, 200000) i;
CREATE INDEX big_at ON big (at);
CREATE UNIQUE INDEX big_payload_partial ON big (payload) WHERE flag;
CREATE INDEX big_lower ON big (lower(payload));

CREATE TABLE "Other Schema"."Mixed Case" ("Id" int PRIMARY KEY, "Value" text CHECK ("Value" <> 'forbidden'));
INSERT INTO "Other Schema"."Mixed Case" VALUES (1, 'one'), (2, NULL);

CREATE SEQUENCE free_counter START 7;
SELECT nextval('free_counter'), nextval('free_counter');
`

// describeDatabase renders a database's user tables (definitions and an
// ordered checksum of their rows), indexes, constraints and sequences as
// text, so two databases can be compared for equality.
func describeDatabase(t *testing.T, db string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.DSN(db))
	if err != nil {
		t.Fatalf("connect %s: %v", db, err)
	}
	defer conn.Close(ctx)
	var b strings.Builder
	lines := func(sql string) {
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
	}
	lines(`SELECT table_schema, table_name, column_name, udt_name, is_nullable, coalesce(column_default, ''), is_identity, is_generated, coalesce(generation_expression, '')
		FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, ordinal_position`)
	lines(`SELECT schemaname, tablename, indexname, indexdef FROM pg_indexes WHERE schemaname NOT IN ('pg_catalog') ORDER BY 1, 2, 3`)
	lines(`SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) FROM pg_constraint
		WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace) AND conrelid <> 0 ORDER BY 1, 2`)
	lines(`SELECT schemaname, sequencename, last_value, increment_by FROM pg_sequences ORDER BY 1, 2`)

	rows, err := conn.Query(ctx, `SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		var n int64
		var sum string
		err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(x::text, E'\n' ORDER BY x::text)), '') FROM %s x`, tb)).Scan(&n, &sum)
		if err != nil {
			t.Fatalf("checksum %s: %v", tb, err)
		}
		fmt.Fprintf(&b, "table %s rows=%d md5=%s\n", tb, n, sum)
	}
	return b.String()
}

// requireSameDatabase fails the test unless both databases describe alike.
func requireSameDatabase(t *testing.T, src, dst string) {
	t.Helper()
	a, b := describeDatabase(t, src), describeDatabase(t, dst)
	if a == b {
		return
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var diff []string
	seen := map[string]int{}
	for _, l := range bl {
		seen[l]++
	}
	for _, l := range al {
		if seen[l] > 0 {
			seen[l]--
			continue
		}
		diff = append(diff, "- "+l)
	}
	seen = map[string]int{}
	for _, l := range al {
		seen[l]++
	}
	for _, l := range bl {
		if seen[l] > 0 {
			seen[l]--
			continue
		}
		diff = append(diff, "+ "+l)
	}
	t.Fatalf("restored database %s differs from source %s:\n%s", dst, src, strings.Join(diff, "\n"))
}

// connectPair opens comparison sessions to src and dst, closed when the test ends.
func connectPair(t *testing.T, src, dst string) (sc, dc *pgx.Conn) {
	t.Helper()
	var err error
	if sc, err = pgxConnect(src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close(context.Background()) })
	if dc, err = pgxConnect(dst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close(context.Background()) })
	return sc, dc
}

// pgxConnect connects to db with fixed output settings (those the server
// defaults to here), so that two databases configured to print values
// differently still compare by value.
func pgxConnect(db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(testenv.DSN(db))
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "extra_float_digits": "1",
		"bytea_output": "hex", "TimeZone": "UTC"} {
		cfg.RuntimeParams[k] = v
	}
	return pgx.ConnectConfig(context.Background(), cfg)
}

// lockTable takes an ACCESS EXCLUSIVE lock on table in db, in a transaction
// of its own, and returns the function that releases it.
func lockTable(t *testing.T, db, table string) (release func()) {
	t.Helper()
	conn, err := pgxConnect(db)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(context.Background())
	if err != nil {
		conn.Close(context.Background())
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		conn.Close(context.Background())
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Rollback(context.Background())
			conn.Close(context.Background())
		})
	}
	t.Cleanup(release)
	return release
}
