// Package pitr finds a point in a chain's history: the last source
// transaction that committed at or before a time or a source position, on a
// transaction boundary. restore --until reads the chain up to there and no
// further.
package pitr

import (
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Position is a source position given as a point, read by the chain's
// source engine.
type Position interface {
	// Includes reports whether the transaction whose commit record is c
	// committed at or before the point.
	Includes(c *chain.Change) bool
	// Compare places the point against a position the chain records for
	// a link (a manifest's start or end position): negative when the point
	// comes before pos, zero at pos, positive after it.
	Compare(pos string) (int, error)
	// String writes the point as given, normalised.
	String() string
}

// PositionParser reads a point given in one engine's own form.
type PositionParser func(s string) (Position, error)

var parsers = struct {
	sync.RWMutex
	of map[string]PositionParser
	// forms describe each engine's forms for messages.
	forms map[string]string
}{
	of:    map[string]PositionParser{"postgres": parseLSNPoint},
	forms: map[string]string{"postgres": "a PostgreSQL LSN such as 0/16B3748"},
}

// RegisterPositionParser defines how points of a source engine (the
// catalog's source.engine) are read; forms says which forms it takes, for
// messages. PostgreSQL's LSNs are defined here, other engines register
// theirs from their own package.
func RegisterPositionParser(engine, forms string, p PositionParser) {
	parsers.Lock()
	defer parsers.Unlock()
	parsers.of[engine] = p
	parsers.forms[engine] = forms
}

// Point is where a restore stops: a commit time or a source position.
// Exactly one of the two is set.
type Point struct {
	// Time, when not zero, includes every transaction whose commit time is
	// at or before it.
	Time time.Time
	// Position, when set, includes every transaction the engine's position
	// reads as at or before it.
	Position Position
}

// ParseTime reads an RFC 3339 time with its offset (fractions of a second
// allowed) as a point.
func ParseTime(s string) (Point, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return Point{}, errcode.New(errcode.PointInvalid, "--until %q is not an RFC 3339 time with an offset (such as 2026-12-05T14:03:00Z)", s)
	}
	return Point{Time: t}, nil
}

// ParsePosition reads s as a point of engine.
func ParsePosition(engine, s string) (Point, error) {
	parsers.RLock()
	p, forms := parsers.of[engine], parsers.forms[engine]
	parsers.RUnlock()
	if p == nil {
		return Point{}, errcode.New(errcode.PointInvalid, "--until-position %q: this sluice reads no positions of the chain's source engine %q", s, engine)
	}
	pos, err := p(strings.TrimSpace(s))
	if err != nil {
		return Point{}, errcode.Wrap(errcode.PointInvalid, err, "--until-position %q is not a position of the chain's source engine %s (%s)", s, engine, forms)
	}
	return Point{Position: pos}, nil
}

// String names the point for messages.
func (p Point) String() string {
	if p.Position != nil {
		return "position " + p.Position.String()
	}
	return p.Time.Format(time.RFC3339Nano)
}

// includes reports whether the transaction that commit closes is at or
// before the point.
func (p Point) includes(commit *chain.Change) bool {
	if p.Position != nil {
		return p.Position.Includes(commit)
	}
	return commit.CommitTime <= p.Time.UnixMicro()
}

// lsnPoint is a point given as a PostgreSQL LSN: it includes every
// transaction whose commit record starts at or before it (the commit LSN
// `sluice backup inspect` prints).
type lsnPoint uint64

func parseLSNPoint(s string) (Position, error) {
	lsn, err := chain.ParseLSN(s)
	if err != nil {
		return nil, err
	}
	return lsnPoint(lsn), nil
}

func (p lsnPoint) Includes(c *chain.Change) bool { return c.CommitLSN <= uint64(p) }

func (p lsnPoint) Compare(pos string) (int, error) {
	lsn, err := chain.ParseLSN(pos)
	if err != nil {
		return 0, err
	}
	switch {
	case uint64(p) < lsn:
		return -1, nil
	case uint64(p) > lsn:
		return 1, nil
	}
	return 0, nil
}

func (p lsnPoint) String() string { return chain.FormatLSN(uint64(p)) }

// describe names a transaction's commit record for a report.
func describe(c *chain.Change) Transaction {
	tx := Transaction{CommitTime: time.UnixMicro(c.CommitTime).UTC(), Identity: c.Identity().String()}
	if c.Tx != "" {
		tx.Position = c.Tx
	} else {
		tx.Position = chain.FormatLSN(c.CommitLSN)
	}
	return tx
}

// Transaction names one source transaction of a cut.
type Transaction struct {
	// CommitTime is when it committed on the source.
	CommitTime time.Time `json:"commit_time"`
	// Position is its commit LSN (PostgreSQL) or its GTID (MySQL family).
	Position string `json:"position"`
	// Identity is its apply identity as messages name it.
	Identity string `json:"identity"`
	// Link is the incremental that holds it.
	Link string `json:"link"`
}
