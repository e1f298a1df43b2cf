package mysql

import (
	"context"
	"testing"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// tableMap is the table map a server logs for a table of bigint and
// varchar columns (names as given, the first a bigint).
func tableMap(id uint64, table string, cols ...string) *replication.TableMapEvent {
	ev := &replication.TableMapEvent{TableID: id, Schema: []byte("shop"), Table: []byte(table), ColumnCount: uint64(len(cols))}
	for i, c := range cols {
		typ := byte(gomysql.MYSQL_TYPE_VARCHAR)
		if i == 0 {
			typ = gomysql.MYSQL_TYPE_LONGLONG
		}
		ev.ColumnType = append(ev.ColumnType, typ)
		ev.ColumnMeta = append(ev.ColumnMeta, 0)
		ev.ColumnName = append(ev.ColumnName, []byte(c))
	}
	return ev
}

// A table ID names a table only while the table map says so: a server
// that restarted (or evicted a table from its cache) gives the ID of one
// table to another, and the rows logged under it are then the other
// table's. The TestFaultsSourceMariaDB crash decoded a row of notes as one
// of items, with the ID items had before the crash.
func TestTableIDGivenToAnotherTable(t *testing.T) {
	num, text := &value.Kind{Name: value.Int, Width: 64}, &value.Kind{Name: value.Text}
	schema := &chain.Schema{Tables: []chain.Table{
		{Schema: "shop", Name: "items", Columns: []chain.Column{{Name: "id", Type: "bigint", Kind: num}, {Name: "v", Type: "varchar(64)", Kind: text}}},
		{Schema: "shop", Name: "notes", Columns: []chain.Column{{Name: "k", Type: "bigint", Kind: num}, {Name: "body", Type: "varchar(200)", Kind: text}}},
	}}
	tr := newTracker(nil, "shop", schema, nil, nil)
	ctx := context.Background()
	got, _, err := tr.resolve(ctx, tableMap(7, "items", "id", "v"))
	if err != nil || got.recorded.Name != "items" {
		t.Fatalf("table 7 as items: %v, %v", got, err)
	}
	got, _, err = tr.resolve(ctx, tableMap(7, "notes", "k", "body"))
	if err != nil {
		t.Fatal(err)
	}
	if got.recorded.Name != "notes" {
		t.Fatalf("a table map naming notes under items' old ID resolved to %s", got.recorded.Name)
	}
	// A new binlog file forgets every ID.
	tr.newLog()
	if len(tr.byID) != 0 {
		t.Fatalf("after a new binlog file the tracker still knows %d table IDs", len(tr.byID))
	}
	got, _, err = tr.resolve(ctx, tableMap(3, "items", "id", "v"))
	if err != nil || got.recorded.Name != "items" {
		t.Fatalf("table 3 as items after the new file: %v, %v", got, err)
	}
}
