package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// fourByteSource is a MariaDB source table with a four-byte character in
// every string position: values, ENUM and SET labels (beside two- and
// three-byte ones and a real '?'), defaults (NULL-able and NOT NULL, of
// varchar, text, enum and set), a CHECK and comments. MariaDB's catalog
// shows each of those characters as '?'.
const fourByteSource = `
CREATE TABLE fb (
  id int PRIMARY KEY,
  e enum('plain','é','漢','🚀','?') DEFAULT '🚀' COMMENT 'e🚀',
  en enum('x','🚀y') NOT NULL DEFAULT '🚀y',
  s set('p','🚀','😀z') DEFAULT 'p,🚀',
  v varchar(20) NOT NULL DEFAULT 'n🚀' COMMENT 'v🚀',
  tx text DEFAULT 'x🚀',
  js json,
  CONSTRAINT ck CHECK (v <> 'x🚀')
) DEFAULT CHARSET=utf8mb4 COMMENT='t🚀';
INSERT INTO fb (id, e, en, s, v, js) VALUES
  (1, 'plain', 'x', 'p', 'v', '{"k": "v"}'),
  (2, 'é', '🚀y', '🚀', 'é漢🚀', '{"k": "🚀"}'),
  (3, '🚀', DEFAULT, '😀z,p', DEFAULT, NULL),
  (4, DEFAULT, DEFAULT, DEFAULT, DEFAULT, NULL);
`

// fourByteChanges run after the full: rows carrying the four-byte labels
// (read from the binlog, where the table map gives the labels' exact
// bytes), then ADD COLUMNs whose four-byte defaults MariaDB writes into
// the existing rows without logging them, then rows after that change.
const fourByteChanges = `
INSERT INTO fb (id, e, en, s, v) VALUES (10, '🚀', '🚀y', 'p,🚀', 'i🚀'), (11, '?', 'x', '😀z', 'q');
UPDATE fb SET e = '🚀', s = 'p,😀z', tx = 'u🚀' WHERE id = 1;
DELETE FROM fb WHERE id = 2;
ALTER TABLE fb ADD COLUMN d varchar(10) NOT NULL DEFAULT 'n🚀', ADD COLUMN de enum('a','🚀') NOT NULL DEFAULT '🚀', ADD COLUMN ds set('a','🚀') DEFAULT 'a,🚀';
INSERT INTO fb (id, e, de) VALUES (12, '🚀', 'a');
UPDATE fb SET d = 'm🚀' WHERE id = 3;
`

// MariaDB → PostgreSQL, → SQLite and → MariaDB with four-byte characters
// in every string position: a full, then an incremental with changes
// carrying four-byte labels and an ADD COLUMN with four-byte defaults,
// restored into a fresh database and applied by a broker started cold
// after the full. Each target ends with the source's rows exactly (no
// '?': rows an ADD COLUMN filled with its default included), a PostgreSQL
// target's defaults hold the four-byte character, and the chain records
// no '?' for them.
func TestMariaDBFourByteTextEverywhere(t *testing.T) {
	for _, tc := range []struct{ name, driver string }{
		{"postgres", "postgres"},
		{"sqlite", "sqlite"},
		{"mariadb", "mysql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newTarget := func(role string) string {
				switch tc.driver {
				case "postgres":
					return testenv.DSN(testenv.CreateDB(t, "fb"+role))
				case "sqlite":
					return filepath.Join(t.TempDir(), role+".db")
				}
				return testenv.MySQLDSN(testenv.CreateMySQLDB(t, "fb"+role))
			}
			srcDSN := testenv.MySQLDSN(testenv.CreateMySQLDB(t, "fbsrc"))
			mariaExec(t, srcDSN, fourByteSource)
			src := []string{"--source-driver", "mariadb", "--source", srcDSN}
			chainURL := fileChain(t)
			mustSluice(t, append(append([]string{"backup", "full"}, src...), "--target", chainURL)...)

			brokerDSN := newTarget("broker")
			stream := fmt.Sprintf("fourbyte-%s-%d", tc.name, time.Now().UnixNano()%1e6)
			mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target-driver", tc.driver,
				"--target", brokerDSN, "--stream-id", stream, "--poll-interval", "300ms", "--detach", "--reset-target-data", "--yes")

			mariaExec(t, srcDSN, fourByteChanges)
			mustSluice(t, append(append([]string{"backup", "incremental"}, src...), "--target", chainURL)...)
			requireFourByteSchema(t, chainURL)

			restoreDSN := newTarget("restore")
			mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", tc.driver, "--target", restoreDSN)
			requireNeutralRowsEqual(t, chainURL, "MariaDB source "+srcDSN, mariaNeutralRows(t, srcDSN),
				tc.driver+" restore "+restoreDSN, targetNeutralRows(t, tc.driver, restoreDSN))
			requireFourByteDefaults(t, tc.driver, restoreDSN)

			waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 2*time.Minute)
			requireNeutralRowsEqual(t, chainURL, "MariaDB source "+srcDSN, mariaNeutralRows(t, srcDSN),
				tc.driver+" broker target "+brokerDSN, targetNeutralRows(t, tc.driver, brokerDSN))
			requireFourByteDefaults(t, tc.driver, brokerDSN)
			mustSluice(t, "sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)
			waitWorkflowEnd(t, "broker/"+stream, time.Minute)
		})
	}
}

// requireFourByteSchema fails unless the chain's newest schema records
// fb's labels and defaults with their four-byte characters.
func requireFourByteSchema(t *testing.T, chainURL string) {
	t.Helper()
	ch, cat := openChainAt(t, chainURL)
	schema, err := ch.SchemaAt(context.Background(), cat, cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	var tb *chain.Table
	for i := range schema.Tables {
		if schema.Tables[i].Name == "fb" {
			tb = &schema.Tables[i]
		}
	}
	if tb == nil {
		t.Fatal("the chain records no table fb")
	}
	want := map[string][2]string{
		"e":  {"enum('plain','é','漢','🚀','?')", "'🚀'"},
		"en": {"enum('x','🚀y')", "'🚀y'"},
		"s":  {"set('p','🚀','😀z')", "'p,🚀'"},
		"v":  {"varchar(20)", "'n🚀'"},
		"tx": {"text", "'x🚀'"},
		"d":  {"varchar(10)", "'n🚀'"},
		"de": {"enum('a','🚀')", "'🚀'"},
		"ds": {"set('a','🚀')", "'a,🚀'"},
	}
	for _, c := range tb.Columns {
		if w, ok := want[c.Name]; ok && (c.Type != w[0] || c.Default != w[1]) {
			t.Errorf("the chain records %s as %s DEFAULT %s, want %s DEFAULT %s", c.Name, c.Type, c.Default, w[0], w[1])
		}
	}
}

// requireFourByteDefaults fails unless a PostgreSQL target's columns
// fb.v (from the full) and fb.d (added by the incremental) have their
// four-byte defaults in the target's schema. The SQLite and MariaDB
// targets carry no defaults (docs/sqlite-target.md, docs/mysql-target.md):
// there the rows an ADD COLUMN filled, compared with the source's, are
// what the recorded default decides.
func requireFourByteDefaults(t *testing.T, driver, dsn string) {
	t.Helper()
	if driver != "postgres" {
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for col, want := range map[string]string{"v": "'n🚀'", "d": "'n🚀'", "e": "'🚀'"} {
		var def string
		if err := conn.QueryRow(ctx, `SELECT COALESCE(column_default, '') FROM information_schema.columns WHERE table_name = 'fb' AND column_name = $1`, col).Scan(&def); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(def, want) {
			t.Errorf("the PostgreSQL target's default of fb.%s is %q, want %s", col, def, want)
		}
	}
}

// Where the server cannot give a four-byte default exactly (a NOT NULL
// column's, on a table with no row to read it through), the chain records
// no '?': the full is refused, and so is an incremental whose schema
// change meets such a column mid-stream, each naming table and column.
// Once the table holds a row the same commands go through, and a restore
// holds the exact default.
func TestMariaDBFourByteDefaultUnreadableIsRefused(t *testing.T) {
	srcDSN := testenv.MySQLDSN(testenv.CreateMySQLDB(t, "fbrefsrc"))
	db := strings.TrimPrefix(srcDSN[strings.LastIndexByte(srcDSN, '/'):], "/")
	mariaExec(t, srcDSN, `CREATE TABLE w (id int PRIMARY KEY, v varchar(10) NOT NULL DEFAULT 'n🚀') DEFAULT CHARSET=utf8mb4`)
	src := []string{"--source-driver", "mariadb", "--source", srcDSN}
	chainURL := fileChain(t)
	refused := func(args ...string) {
		t.Helper()
		r := sluice(t, args...)
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-TEXT-LOSSY") || !strings.Contains(r.stderr, db+".w.") {
			t.Fatalf("sluice %s: want exit 3, SLUICE-E-SOURCE-TEXT-LOSSY naming %s.w; got %s", strings.Join(args, " "), db, r)
		}
	}
	refused(append(append([]string{"backup", "full"}, src...), "--target", chainURL)...)
	mariaExec(t, srcDSN, `INSERT INTO w (id) VALUES (1)`)
	mustSluice(t, append(append([]string{"backup", "full"}, src...), "--target", chainURL)...)

	// Mid-stream: the change is met at the rows after it, when the table
	// is empty again.
	mariaExec(t, srcDSN, `ALTER TABLE w ADD COLUMN d varchar(10) NOT NULL DEFAULT 'd🚀'; INSERT INTO w (id) VALUES (2); DELETE FROM w`)
	refused(append(append([]string{"backup", "incremental"}, src...), "--target", chainURL)...)
	mariaExec(t, srcDSN, `INSERT INTO w (id) VALUES (3)`)
	mustSluice(t, append(append([]string{"backup", "incremental"}, src...), "--target", chainURL)...)
	file := filepath.Join(t.TempDir(), "refused.db")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file)
	requireNeutralRowsEqual(t, chainURL, "MariaDB source "+srcDSN, mariaNeutralRows(t, srcDSN),
		"SQLite restore "+file, targetNeutralRows(t, "sqlite", file))
}
