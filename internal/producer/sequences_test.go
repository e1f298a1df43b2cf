package producer

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/source"
)

// Each incremental records the counters that moved since the session's last
// record, read after the window's capture; a quiet window reads none, and a
// new session records every counter once.
func TestWindowsRecordTheSequencesThatMoved(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch,
		fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300",
			sequences: map[string]int64{"public.t_id_seq": 1, "public.u_id_seq": 40}},
		fakeWindow{},
		fakeWindow{records: chaintest.Txn(8, insert("public.t", "2")), end: "0/380",
			sequences: map[string]int64{"public.t_id_seq": 2, "public.u_id_seq": 40}},
		fakeWindow{records: chaintest.Txn(9, insert("public.v", "3")), end: "0/400"},
		fakeWindow{records: chaintest.Txn(10, insert("public.t", "4")), end: "0/480"})
	var s Sessions
	var got []map[string]int64
	for i := range 4 {
		res, err := Window(ctx, ch, streamOptions(src, "attempt-"+string(rune('a'+i)), &s), source.Limits{})
		if err != nil {
			t.Fatalf("window %d: %v", i+1, err)
		}
		if !res.Committed {
			if src.sequenceReads != 1 {
				t.Fatalf("a quiet window read the counters (%d reads)", src.sequenceReads)
			}
			continue
		}
		m, _ := storedRecords(t, ch, res.LinkID)
		got = append(got, m.Sequences)
	}
	want := []map[string]int64{
		{"public.t_id_seq": 1, "public.u_id_seq": 40},
		{"public.t_id_seq": 2},
		nil, // nothing moved
	}
	if len(got) != len(want) {
		t.Fatalf("%d incrementals, want %d", len(got), len(want))
	}
	for i := range want {
		if !maps.Equal(got[i], want[i]) {
			t.Errorf("incremental %d records %v, want %v", i+1, got[i], want[i])
		}
	}
	// Another run's session records every counter again.
	s.Drop("producer/test")
	o := options(src, "attempt-e")
	res, err := Window(ctx, ch, o, source.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := storedRecords(t, ch, res.LinkID)
	if want := map[string]int64{"public.t_id_seq": 2, "public.u_id_seq": 40}; !maps.Equal(m.Sequences, want) {
		t.Errorf("a new session records %v, want %v", m.Sequences, want)
	}
}

// A window whose counters cannot be read commits nothing and leaves no
// chunk behind.
func TestWindowFailsWhenTheSequencesCannotBeRead(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"})
	src.sequencesErr = errors.New("connection reset")
	if _, err := Window(ctx, ch, options(src, "attempt-1"), source.Limits{}); err == nil {
		t.Fatal("the window committed without its counters")
	}
	if cat := loadCatalog(t, ch); len(cat.Segments[0].Incrementals) != 0 {
		t.Fatal("a failed window was committed")
	}
	if keys := dataKeys(t, ch, "attempt-1"); len(keys) != 0 {
		t.Fatalf("a failed window left %v", keys)
	}
	if len(src.confirms) != 0 {
		t.Fatal("a failed window confirmed the capture")
	}
}
