package producer

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/source"
)

// DefaultSessionIdle is how long Sessions keeps a capture session nobody
// took back before closing it. It is well under PostgreSQL's default
// wal_sender_timeout (60 s): an idle session does not answer the server's
// keepalives.
const DefaultSessionIdle = 10 * time.Second

// Sessions keeps a producer's capture session open from one window to the
// next, so a stream reads its log once rather than from the slot's restart
// point at every window (PostgreSQL decodes everything from restart_lsn
// again on each connection, which on a busy cluster is seconds of other
// databases' WAL per window). A session is handed back only to the same
// owner at the same chain tip it left, so a window never starts anywhere
// but where the catalog says. Any other step of the same stream (a
// rotation, a later run) closes it first, which frees the log for that
// step; a step of another stream on the chain (a one-shot incremental)
// leaves it, and meets the log as held, as it would during a window. The
// zero value is ready to use.
type Sessions struct {
	// Idle closes a session not taken back within it (zero:
	// DefaultSessionIdle).
	Idle time.Duration

	mu   sync.Mutex
	idle map[string]*idleSession // by chain ID
}

// idleSession is a capture parked between two windows of a stream.
type idleSession struct {
	capt          source.Capture
	stream, owner string
	// tip and position are the chain's tip link and its end position when
	// the session was parked: the session resumes exactly there.
	tip, position string
	timer         *time.Timer
}

// take removes the session stream parked for chain and returns it when it
// was parked by owner at tip and position; a session of the stream parked
// by another run or at another tip is closed, and one of another stream
// stays parked. A nil Sessions holds nothing.
func (s *Sessions) take(chain, stream, owner, tip, position string) source.Capture {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	p := s.idle[chain]
	if p == nil || p.stream != stream {
		s.mu.Unlock()
		return nil
	}
	delete(s.idle, chain)
	s.mu.Unlock()
	p.timer.Stop()
	if p.owner != owner || p.tip != tip || p.position != position {
		p.capt.Close()
		return nil
	}
	return p.capt
}

// park keeps capt for the next window of stream's run owner on chain,
// whose tip is now link tip ending at position. A session already parked
// there is closed.
func (s *Sessions) park(chain, stream, owner, tip, position string, capt source.Capture) {
	idle := s.Idle
	if idle <= 0 {
		idle = DefaultSessionIdle
	}
	p := &idleSession{capt: capt, stream: stream, owner: owner, tip: tip, position: position}
	s.mu.Lock()
	if s.idle == nil {
		s.idle = map[string]*idleSession{}
	}
	old := s.idle[chain]
	if old != nil {
		old.timer.Stop()
	}
	s.idle[chain] = p
	p.timer = time.AfterFunc(idle, p.expire(s, chain))
	s.mu.Unlock()
	if old != nil {
		old.capt.Close()
	}
}

// expire returns what closes p once it was parked too long, unless it was
// taken back meanwhile.
func (p *idleSession) expire(s *Sessions, chain string) func() {
	return func() {
		s.mu.Lock()
		mine := s.idle[chain] == p
		if mine {
			delete(s.idle, chain)
		}
		s.mu.Unlock()
		if mine {
			p.capt.Close()
		}
	}
}

// Drop closes every session owner parked: its run is ending (stopped), so
// nothing will take them back and the log must be free at once.
func (s *Sessions) Drop(owner string) {
	if s == nil {
		return
	}
	var closing []source.Capture
	s.mu.Lock()
	for chain, p := range s.idle {
		if p.owner == owner {
			p.timer.Stop()
			delete(s.idle, chain)
			closing = append(closing, p.capt)
		}
	}
	s.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// Parked reports how many sessions are parked.
func (s *Sessions) Parked() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle)
}
