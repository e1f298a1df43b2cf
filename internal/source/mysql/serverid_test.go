package mysql

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

// The replica server ID: a second reader of the chain's binlog is a
// second producer (SOURCE-READER-IN-USE), a later attempt of the same producer
// takes the binlog over, and an ID the source itself uses is refused.
func TestReplicaServerIDs(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	m := f.full(source.FullOptions{})
	ctx := context.Background()
	cat, _ := f.ch.LoadCatalog(ctx)
	open := func(owner string) (source.Capture, error) {
		return f.src.OpenCapture(ctx, source.CaptureOptions{Source: cat.Source, Start: m.EndPosition, Schema: m.Schema, Owner: owner})
	}
	first, err := open("producer/a")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// Registration shows in SHOW SLAVE HOSTS once the dump runs.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		rows, err := testDB(t, f).QueryContext(ctx, "SHOW SLAVE HOSTS")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			n++
		}
		rows.Close()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := open(""); !errcode.Is(err, errcode.SourceReaderInUse) || errcode.ExitStatus(err) != 3 {
		t.Fatalf("a second reader: %v", err)
	}
	again, err := open("producer/a")
	if err != nil {
		t.Fatalf("a later attempt of the same producer: %v", err)
	}
	again.Close()

	var own int
	if err := testDB(t, f).QueryRowContext(ctx, "SELECT @@server_id").Scan(&own); err != nil {
		t.Fatal(err)
	}
	clash, err := source.Open(ctx, "mariadb", f.dsn+"?server_id="+strconv.Itoa(own), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clash.OpenCapture(ctx, source.CaptureOptions{Source: cat.Source, Start: m.EndPosition, Schema: m.Schema}); !errcode.Is(err, errcode.SourceServerIDClash) || errcode.ExitStatus(err) != 3 {
		t.Fatalf("the source's own server ID: %v", err)
	}
}
