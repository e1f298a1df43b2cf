package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/source"
)

// streamOptions are a stream's window options: its session is parked in s
// between windows.
func streamOptions(src source.Source, attempt string, s *Sessions) Options {
	o := options(src, attempt)
	o.Sessions, o.KeepSession, o.Stream = s, true, "producer/stream"
	return o
}

// A stream's windows on one worker read one capture session: the second
// window resumes the session the first parked, commits on the first's
// incremental, and the session is closed only when the run drops it.
func TestStreamWindowsResumeOneSession(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch,
		fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"},
		fakeWindow{},
		fakeWindow{records: chaintest.Txn(8, insert("public.t", "2")), end: "0/380"})
	var s Sessions
	var last Result
	for i, attempt := range []string{"attempt-1", "attempt-2", "attempt-3"} {
		res, err := Window(ctx, ch, streamOptions(src, attempt, &s), source.Limits{})
		if err != nil {
			t.Fatalf("window %d: %v", i+1, err)
		}
		if res.Committed {
			last = res
		}
	}
	if len(src.opened) != 1 || src.closed.Load() != 0 || s.Parked() != 1 {
		t.Fatalf("three windows opened %d sessions and closed %d (%d parked); want one session, still parked", len(src.opened), src.closed.Load(), s.Parked())
	}
	m, _ := storedRecords(t, ch, last.LinkID)
	if m.StartPosition != "0/300" || m.EndPosition != "0/380" {
		t.Errorf("the window after a quiet one covers %s..%s, want 0/300..0/380", m.StartPosition, m.EndPosition)
	}
	s.Drop("producer/other")
	if s.Parked() != 1 {
		t.Fatal("dropping another owner's sessions closed this one")
	}
	s.Drop("producer/test")
	if s.Parked() != 0 || src.closed.Load() != 1 {
		t.Fatalf("after Drop: %d parked, %d closed; want the session closed", s.Parked(), src.closed.Load())
	}
}

// A parked session is handed back only to its owner at the tip it left:
// after another writer moved the tip, for a later run of the stream, or for
// a rotation, it is closed first (freeing the log) and a new session opens
// at the catalog's tip.
func TestParkedSessionIsClosedWhenItCannotResume(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// next runs the step after the parked window.
		next func(t *testing.T, ch *chain.Chain, src *fakeSource, s *Sessions) (wantStart string)
	}{
		{"a later run of the stream", func(t *testing.T, ch *chain.Chain, src *fakeSource, s *Sessions) string {
			o := streamOptions(src, "attempt-2", s)
			o.Owner = "producer/next-run"
			if _, err := Window(ctx, ch, o, source.Limits{}); err != nil {
				t.Fatal(err)
			}
			return "0/300"
		}},
		{"a rotation", func(t *testing.T, ch *chain.Chain, src *fakeSource, s *Sessions) string {
			src.rotation = fullAt("0/300")
			src.windows = []fakeWindow{{before: "0/300"}}
			o := options(src, "attempt-2")
			o.Sessions, o.Stream = s, "producer/stream"
			if _, err := Rotate(ctx, ch, o); err != nil {
				t.Fatal(err)
			}
			if s.Parked() != 0 {
				t.Error("a rotation parked its session")
			}
			return "0/300"
		}},
		{"a tip another writer moved", func(t *testing.T, ch *chain.Chain, src *fakeSource, s *Sessions) string {
			// Another worker's window committed meanwhile.
			other := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(9, insert("public.t", "9")), end: "0/350"})
			if _, err := Window(ctx, ch, options(other, "elsewhere"), source.Limits{}); err != nil {
				t.Fatal(err)
			}
			if _, err := Window(ctx, ch, streamOptions(src, "attempt-2", s), source.Limits{}); err != nil {
				t.Fatal(err)
			}
			return "0/350"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, _ := newChain(t)
			src := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"}, fakeWindow{})
			var s Sessions
			if _, err := Window(ctx, ch, streamOptions(src, "attempt-1", &s), source.Limits{}); err != nil {
				t.Fatal(err)
			}
			want := tc.next(t, ch, src, &s)
			if len(src.opened) != 2 || src.opened[1].Start != want {
				t.Fatalf("sessions opened %+v; want a second one at %s", src.opened, want)
			}
			if src.closed.Load() < 1 {
				t.Fatal("the parked session was not closed before a new one opened")
			}
		})
	}
}

// A failed window parks nothing, and a session nobody takes back is closed
// once Idle passes.
func TestSessionsCloseFailedAndExpiredSessions(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"})
	src.confirmErr = context.DeadlineExceeded
	s := Sessions{Idle: 50 * time.Millisecond}
	if _, err := Window(ctx, ch, streamOptions(src, "attempt-1", &s), source.Limits{}); err == nil {
		t.Fatal("a window whose confirmation failed returned no error")
	}
	if s.Parked() != 0 || src.closed.Load() != 1 {
		t.Fatalf("after a failed window: %d parked, %d closed; want it closed", s.Parked(), src.closed.Load())
	}

	src = newFakeSource(t, ch, fakeWindow{})
	if _, err := Window(ctx, ch, streamOptions(src, "attempt-2", &s), source.Limits{}); err != nil {
		t.Fatal(err)
	}
	if s.Parked() != 1 {
		t.Fatal("a quiet window parked nothing")
	}
	deadline := time.Now().Add(10 * time.Second)
	for src.closed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Parked() != 0 || src.closed.Load() != 1 {
		t.Fatalf("after Idle: %d parked, %d closed; want the session closed", s.Parked(), src.closed.Load())
	}
}

// A step of another stream on the chain (a one-shot incremental) leaves the
// stream's parked session alone: on PostgreSQL it meets the slot held, as
// it would during a window, rather than taking the chain from the stream.
func TestAnotherStreamLeavesAParkedSessionAlone(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	src := newFakeSource(t, ch, fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"}, fakeWindow{})
	var s Sessions
	if _, err := Window(ctx, ch, streamOptions(src, "attempt-1", &s), source.Limits{}); err != nil {
		t.Fatal(err)
	}
	o := options(src, "once")
	o.Sessions, o.Owner, o.Stream = &s, "incremental/once@1", "incremental/once"
	if _, err := Window(ctx, ch, o, source.Limits{Until: "now"}); err != nil {
		t.Fatal(err)
	}
	if s.Parked() != 1 || src.closed.Load() != 1 || len(src.opened) != 2 {
		t.Fatalf("%d parked, %d closed, %d opened; want the stream's session still parked and the one-shot's own closed",
			s.Parked(), src.closed.Load(), len(src.opened))
	}
}

// A resumed session that fails before delivering anything (its connection
// was lost while parked) is replaced by a fresh one at the same tip, within
// the same window; one that fails after delivering fails the window.
func TestALostParkedSessionIsReopenedOnce(t *testing.T) {
	ctx := context.Background()
	ch, _ := newChain(t)
	lost := errors.New("connection reset by peer")
	src := newFakeSource(t, ch,
		fakeWindow{records: chaintest.Txn(7, insert("public.t", "1")), end: "0/300"},
		fakeWindow{fail: lost},
		fakeWindow{records: chaintest.Txn(8, insert("public.t", "2")), end: "0/380"})
	var s Sessions
	if _, err := Window(ctx, ch, streamOptions(src, "attempt-1", &s), source.Limits{}); err != nil {
		t.Fatal(err)
	}
	res, err := Window(ctx, ch, streamOptions(src, "attempt-2", &s), source.Limits{})
	if err != nil {
		t.Fatalf("the window after a lost parked session: %v", err)
	}
	if !res.Committed || res.Start != "0/300" || res.End != "0/380" {
		t.Errorf("window %+v, want 0/300..0/380 committed", res)
	}
	if len(src.opened) != 2 || src.opened[1].Start != "0/300" || src.closed.Load() != 1 {
		t.Errorf("opened %d sessions (second at %+v), closed %d; want the lost one closed and one opened at 0/300", len(src.opened), src.opened, src.closed.Load())
	}
	// A fresh session that fails is not tried again.
	src.windows = []fakeWindow{{fail: lost}}
	s.Drop("producer/test")
	if _, err := Window(ctx, ch, streamOptions(src, "attempt-3", &s), source.Limits{}); !errors.Is(err, lost) {
		t.Errorf("a fresh session's failure: %v, want it returned", err)
	}
}
