package producer

import (
	"context"
	"maps"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/source"
)

// session is a capture session together with the sequence values the
// chain last recorded from it, so that each incremental records only the
// counters that moved since (a fresh session records every one once).
type session struct {
	source.Capture
	// sequences are the values of the session's last committed record.
	sequences map[string]int64
}

// tracked returns capt as a session, wrapping it unless it is one already
// (a parked session taken back keeps what it recorded).
func tracked(capt source.Capture) source.Capture {
	if _, ok := capt.(*session); ok {
		return capt
	}
	return &session{Capture: capt}
}

// sequenceRead is what one read of a session's counters found.
type sequenceRead struct {
	s *session
	// now is every counter as read; moved those the window's incremental
	// records.
	now, moved map[string]int64
}

// readSequences reads the session's counters after a window's capture.
func readSequences(ctx context.Context, capt source.Capture) (sequenceRead, error) {
	s, ok := capt.(*session)
	if !ok {
		s = &session{Capture: capt}
	}
	now, err := s.Sequences(ctx)
	if err != nil {
		return sequenceRead{}, err
	}
	return sequenceRead{s: s, now: now, moved: chain.SequencesMoved(s.sequences, now)}, nil
}

// recorded tells the session its read is in the chain: the next window
// records only what moves from here.
func (r sequenceRead) recorded() {
	if r.s == nil {
		return
	}
	if r.s.sequences == nil {
		r.s.sequences = map[string]int64{}
	}
	maps.Copy(r.s.sequences, r.now)
}
