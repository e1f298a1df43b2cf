package mysql

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/testenv"
)

// Every target session writes and reads text as utf8mb4 even where the
// server ignores the character set the driver asks for at the handshake
// (here the handshake asks for latin1, as such a server's defaults would
// give): a four-byte value is stored and read back exactly, not as '?'.
func TestSessionsAreUTF8MB4(t *testing.T) {
	db := testenv.CreateMySQLDB(t, "mytgt")
	cfg, err := parseDSN(testenv.MySQLDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Collation = "latin1_swedish_ci"
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pool := testenv.MySQL(t, db)
	if _, err := pool.Exec(`CREATE TABLE v (id int PRIMARY KEY, s varchar(10)) DEFAULT CHARSET=utf8mb4`); err != nil {
		t.Fatal(err)
	}
	tdb := sql.OpenDB(connector)
	defer tdb.Close()
	if _, err := tdb.Exec(`INSERT INTO v VALUES (1, ?)`, "a🚀"); err != nil {
		t.Fatal(err)
	}
	wantRows(t, pool, `SELECT s, HEX(s) FROM v`, "a🚀|61F09F9A80")
	var cs, s string
	if err := tdb.QueryRow(`SELECT @@character_set_results, s FROM v`).Scan(&cs, &s); err != nil {
		t.Fatal(err)
	}
	if cs != "utf8mb4" || s != "a🚀" {
		t.Fatalf("session character set %s read %q", cs, s)
	}
}
