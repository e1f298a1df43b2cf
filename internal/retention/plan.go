// Package retention prunes a chain's oldest segments by a policy: the newest
// N segments, or what restores any point of the last D. Whole segments only,
// never the newest; a segment a broker still has to replay is kept (or the
// prune refused) unless forced. The catalog write that drops segments
// commits before any object is deleted, and a journal written just before it
// lets a later run finish the deletes of one that died in between.
package retention

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/dur"
)

// Policy says which segments to keep. Exactly one of its fields is set.
type Policy struct {
	// KeepSegments keeps the newest N segments (N ≥ 1).
	KeepSegments int `json:"keep_segments,omitempty"`
	// KeepDuration keeps every segment needed to restore any point of the
	// last D: a segment goes once the segment after it began more than D ago.
	KeepDuration dur.Duration `json:"keep_duration,omitempty"`
}

// Validate refuses a policy with none or both of its fields set.
func (p Policy) Validate() error {
	switch {
	case p.KeepSegments < 0 || p.KeepDuration < 0:
		return fmt.Errorf("a retention policy keeps a positive number of segments or a positive duration")
	case p.KeepSegments > 0 && p.KeepDuration > 0:
		return fmt.Errorf("give either a number of segments or a duration to keep, not both")
	case p.KeepSegments == 0 && p.KeepDuration == 0:
		return fmt.Errorf("give a number of segments or a duration to keep")
	}
	return nil
}

// String renders the policy as its flag would.
func (p Policy) String() string {
	if p.KeepSegments > 0 {
		if p.KeepSegments == 1 {
			return "keep the newest segment"
		}
		return fmt.Sprintf("keep %d segments", p.KeepSegments)
	}
	return fmt.Sprintf("keep %s", p.KeepDuration)
}

// Segment describes one segment of a plan.
type Segment struct {
	// Index is the segment's place in the catalog the plan was made on.
	Index int `json:"index"`
	// Full is the ID of the segment's full.
	Full string `json:"full"`
	// Links counts the full and its incrementals.
	Links int `json:"links"`
	// From is when the segment's full was written; Until when the next
	// segment's full was (the segment covers the time between).
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
}

// Broker is what the plan knows of one broker that reported its position.
type Broker struct {
	chain.BrokerPosition
	// Needs is the index of the oldest segment the broker still has to
	// replay (len(segments) when it needs none of them).
	Needs int `json:"needs"`
	// Lost is set when the position names no link of the catalog: the
	// broker is already past recovery by replay.
	Lost bool `json:"lost,omitempty"`
	// OtherChain is set when the report belongs to another chain ID.
	OtherChain bool `json:"other_chain,omitempty"`
}

// Plan is what a prune decided on one catalog generation.
type Plan struct {
	// Generation is the catalog generation the plan was made on.
	Generation int64 `json:"generation"`
	// Policy is the policy applied.
	Policy Policy `json:"policy"`
	// Drop are the segments to prune, oldest first; Keep counts the rest.
	Drop []Segment `json:"drop"`
	Keep int       `json:"keep"`
	// Wanted is how many segments the policy alone would drop.
	Wanted int `json:"wanted"`
	// Brokers are the reported broker positions.
	Brokers []Broker `json:"brokers"`
	// Held are the brokers that need a segment the policy would drop.
	Held []Broker `json:"held,omitempty"`
}

// Decide applies policy to cat at now, with the positions brokers
// reported. The newest segment is never dropped. Segments a broker still
// needs are dropped only with force; otherwise Drop stops before the
// oldest one any broker needs, and Held names the brokers that stopped it.
func Decide(cat *chain.Catalog, positions []chain.BrokerPosition, policy Policy, now time.Time, force bool) Plan {
	n := len(cat.Segments)
	plan := Plan{Generation: cat.Generation, Policy: policy}
	want := 0
	switch {
	case policy.KeepSegments > 0:
		want = max(0, n-policy.KeepSegments)
	case policy.KeepDuration > 0:
		horizon := now.Add(-policy.KeepDuration.D())
		for want < n-1 && cat.Segments[want+1].Full.CreatedAt.Before(horizon) {
			want++
		}
	}
	want = min(want, n-1)
	plan.Wanted = want

	floor := n
	for _, p := range positions {
		b := Broker{BrokerPosition: p, Needs: n}
		switch {
		case p.LastApplied == "":
			// A report that does not parse holds everything: what that
			// broker needs is unknown.
			b.Needs = 0
		case p.ChainID != "" && p.ChainID != cat.ChainID:
			b.OtherChain = true
		default:
			b.Needs, b.Lost = needs(cat, p.LastApplied)
		}
		plan.Brokers = append(plan.Brokers, b)
		if b.OtherChain || b.Lost {
			continue
		}
		if b.Needs < want {
			plan.Held = append(plan.Held, b)
		}
		floor = min(floor, b.Needs)
	}
	drop := want
	if !force {
		drop = min(want, floor)
	}
	for i := 0; i < drop; i++ {
		s := cat.Segments[i]
		plan.Drop = append(plan.Drop, Segment{Index: i, Full: s.Full.ID, Links: 1 + len(s.Incrementals),
			From: s.Full.CreatedAt, Until: cat.Segments[i+1].Full.CreatedAt})
	}
	plan.Keep = n - drop
	return plan
}

// needs returns the index of the oldest segment a broker whose last applied
// link is last still has to replay, and whether last is gone from the
// catalog. A broker at a capped segment's tip needs only the segments after
// it (the next segment's first incremental follows that tip); one at the
// tip the first remaining segment's full names as its parent needs them all.
func needs(cat *chain.Catalog, last string) (int, bool) {
	if _, i, ok := cat.Find(last); ok {
		s := cat.Segments[i]
		tip := s.Full.ID
		if k := len(s.Incrementals); k > 0 {
			tip = s.Incrementals[k-1].ID
		}
		if s.Capped && tip == last {
			return i + 1, false
		}
		return i, false
	}
	if len(cat.Segments) > 0 && last != "" && cat.Segments[0].Full.Parent == last {
		return 0, false
	}
	return 0, true
}
