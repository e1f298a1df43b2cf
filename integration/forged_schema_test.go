package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// forgeFull forges the full of the one-table chain at chainURL (a folder)
// as whoever can write the store would, and returns the forged chain's URL:
// forge rewrites the recorded schema, the manifest is sealed again with
// internal/chain's own Manifest.Seal (a content ID is a checksum anyone can
// recompute), and a chain is committed afresh around it — the chunks
// copied, a first catalog generation naming the new ID (a writer of the
// store can write any chain there; a signature, not a checksum, tells
// them apart).
func forgeFull(t *testing.T, chainURL string, forge func(tb *chain.Table)) string {
	t.Helper()
	ctx := context.Background()
	ch, cat := openChainAt(t, chainURL)
	oldID := cat.Segments[0].Full.ID
	m, err := ch.GetManifest(ctx, oldID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Schema == nil || len(m.Schema.Tables) != 1 {
		t.Fatalf("the full records %+v, want one table", m.Schema)
	}
	forge(&m.Schema.Tables[0])
	m.ID = ""
	if err := m.Seal(); err != nil {
		t.Fatal(err)
	}
	forgedURL := fileChain(t)
	src, dst := strings.TrimPrefix(chainURL, "file://"), strings.TrimPrefix(forgedURL, "file://")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dst, "catalog")); err != nil {
		t.Fatal(err)
	}
	forged := chain.Open(openStoreAt(t, forgedURL))
	if err := forged.PutManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	var next chain.Catalog
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(b), oldID, m.ID)), &next); err != nil {
		t.Fatal(err)
	}
	next.Generation = 1
	if err := forged.CommitCatalog(ctx, &next); err != nil {
		t.Fatal(err)
	}
	return forgedURL
}

// refused fails unless r exited 3 with SLUICE-E-CHAIN-SCHEMA-REFUSED.
func refused(t *testing.T, what string, r result) {
	t.Helper()
	if r.exit != 3 || !strings.Contains(r.stdout+r.stderr, "SLUICE-E-CHAIN-SCHEMA-REFUSED") {
		t.Errorf("%s: want exit 3 with SLUICE-E-CHAIN-SCHEMA-REFUSED, got %s", what, r)
	}
}

// sqliteCount runs a count query on the SQLite file (0 when the restore
// left no file).
func sqliteCount(t *testing.T, file, query string) int {
	t.Helper()
	if _, err := os.Stat(file); os.IsNotExist(err) {
		return 0
	}
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pwnedPG fails when PostgreSQL database db holds a relation named like
// pwned.
func pwnedPG(t *testing.T, db string) {
	t.Helper()
	var n string
	if err := queryString(db, `SELECT count(*)::text FROM pg_class WHERE relname LIKE '%pwned%'`, &n); err != nil {
		t.Fatal(err)
	}
	if n != "0" {
		t.Errorf("database %s holds %s relations named pwned: the forged text ran", db, n)
	}
}

// A chain whose full was forged — a recorded column type, default or CHECK
// carrying statements of its own, resealed — is refused with
// SLUICE-E-CHAIN-SCHEMA-REFUSED (exit 3) by verify-chain, by a restore into
// PostgreSQL, SQLite and MariaDB, and by a broker's cold start; no target
// holds a table named pwned afterwards.
func TestForgedChainRefusedByEveryReader(t *testing.T) {
	const pwn = "CREATE TABLE public.pwned (x int)"
	forgeries := []struct {
		name  string
		forge func(tb *chain.Table)
	}{
		{"type", func(tb *chain.Table) {
			tb.Columns[1].Type = "numeric); " + pwn + "; CREATE TABLE public.pwned_pad (y numeric"
		}},
		{"default", func(tb *chain.Table) { tb.Columns[1].Default = "0); " + pwn + "; SELECT (1" }},
		{"check", func(tb *chain.Table) {
			tb.Constraints = append(tb.Constraints, chain.Constraint{Name: "c", Type: "c", Definition: "CHECK (n > 0); " + pwn})
		}},
	}
	for _, f := range forgeries {
		t.Run(f.name, func(t *testing.T) {
			src := testenv.CreateDB(t, "forgesrc")
			testenv.Exec(t, src, `CREATE TABLE a (id int PRIMARY KEY, n numeric); INSERT INTO a VALUES (1, 1.5), (2, 2.5)`)
			chainURL := fileChain(t)
			mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)
			chainURL = forgeFull(t, chainURL, f.forge)

			refused(t, "verify-chain", sluice(t, "backup", "verify-chain", "--target", chainURL))

			pg := testenv.CreateDB(t, "forgedst")
			refused(t, "restore into PostgreSQL", sluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(pg)))
			pwnedPG(t, pg)

			file := filepath.Join(t.TempDir(), "forged.db")
			refused(t, "restore into SQLite", sluice(t, "restore", "--backup-target", chainURL, "--target-driver", "sqlite", "--target", file))
			if n := sqliteCount(t, file, `SELECT count(*) FROM sqlite_master WHERE name LIKE '%pwned%'`); n != 0 {
				t.Errorf("the SQLite file holds %d objects named pwned", n)
			}

			my := testenv.CreateMySQLDB(t, "forgedst")
			refused(t, "restore into MariaDB", sluice(t, "restore", "--backup-target", chainURL, "--target-driver", "mysql", "--target", testenv.MySQLDSN(my)))
			var n int
			if err := testenv.MySQL(t, "").QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '%pwned%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("MariaDB holds %d tables named pwned", n)
			}

			// The cold start refuses before its drop: what the target held stays.
			broker := testenv.CreateDB(t, "forgebrk")
			testenv.Exec(t, broker, `CREATE TABLE a (id int PRIMARY KEY, n numeric); INSERT INTO a VALUES (7, 7)`)
			stream := fmt.Sprintf("forged-%s-%d", strings.ReplaceAll(f.name, " ", "-"), time.Now().UnixNano()%1e6)
			cold := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL,
				"--target", testenv.DSN(broker), "--stream-id", stream, "--poll-interval", "300ms", "--reset-target-data", "--yes")
			refused(t, "broker cold start", cold)
			pwnedPG(t, broker)
			if strings.Contains(cold.stdout+cold.stderr, "partial") {
				t.Errorf("the cold start was refused only after its drop began:\n%s", cold)
			}
			var kept string
			if err := queryString(broker, `SELECT count(*)::text FROM a WHERE id = 7`, &kept); err != nil || kept != "1" {
				t.Errorf("the refused cold start dropped what the target held (table a lost its row)")
			}
		})
	}
}
