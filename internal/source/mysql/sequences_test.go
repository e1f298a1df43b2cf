package mysql

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/source"
)

// A capture reads the AUTO_INCREMENT counters of the chain's tables after a
// window, as the highest value each handed out: tables created since the
// full included once the capture met them, none for a table without the
// column or one that handed out nothing.
func TestCaptureReadsTheAutoIncrementCounters(t *testing.T) {
	f := newFixture(t, `
CREATE TABLE a (id int AUTO_INCREMENT PRIMARY KEY, v text);
CREATE TABLE b (id bigint AUTO_INCREMENT PRIMARY KEY, v text);
CREATE TABLE plain (id int PRIMARY KEY);
INSERT INTO a (v) VALUES ('x')`)
	m := f.full(source.FullOptions{})
	f.exec(`INSERT INTO a (v) VALUES ('y'), ('z');
ALTER TABLE a AUTO_INCREMENT = 3000;
INSERT INTO a (v) VALUES ('w');
INSERT INTO plain VALUES (5);
CREATE TABLE c (id int AUTO_INCREMENT PRIMARY KEY, v text);
INSERT INTO c (v) VALUES ('c1'), ('c2')`)
	ctx := context.Background()
	capt, err := f.src.OpenCapture(ctx, source.CaptureOptions{Source: m.Source, Start: m.EndPosition, Schema: m.Schema})
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	until, err := capt.CurrentPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := capt.Next(ctx, source.Limits{Until: until, Idle: 3 * time.Second}, func(*chain.Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := capt.Sequences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{f.db + ".a": 3000, f.db + ".c": 2}
	if !maps.Equal(got, want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
}

// A full records a table's AUTO_INCREMENT column as identity d, which
// every reader's check (ddlcheck) takes, and no other column as an
// identity.
func TestFullRecordsTheAutoIncrementColumn(t *testing.T) {
	f := newFixture(t, `
CREATE TABLE a (id int AUTO_INCREMENT PRIMARY KEY, n int NOT NULL);
CREATE TABLE plain (id int PRIMARY KEY)`)
	m := f.full(source.FullOptions{})
	got := map[string]string{}
	for _, tb := range m.Schema.Tables {
		for _, c := range tb.Columns {
			got[tb.Name+"."+c.Name] = c.Identity
		}
		if err := ddlcheck.CheckForeign(&tb); err != nil {
			t.Errorf("the recorded table %s is refused: %v", tb.Name, err)
		}
	}
	if want := map[string]string{"a.id": chain.IdentityByDefault, "a.n": "", "plain.id": ""}; !maps.Equal(got, want) {
		t.Fatalf("recorded identities %v, want %v", got, want)
	}
}
