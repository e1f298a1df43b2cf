package target

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sluicehq/sluice/internal/chain"
)

// MarkBatch collects the apply marks one lane transaction writes: for each
// source transaction it touched, the ordinals it applied, in order.
type MarkBatch struct {
	// Link is the incremental the changes came from.
	Link string
	ids  []chain.Identity
	ords map[chain.Identity][]uint32
}

// Add records that a change of link was applied.
func (b *MarkBatch) Add(link string, id chain.Identity, ordinal uint32) {
	if b.ords == nil {
		b.ords = map[chain.Identity][]uint32{}
	}
	b.Link = link
	if _, ok := b.ords[id]; !ok {
		b.ids = append(b.ids, id)
	}
	b.ords[id] = append(b.ords[id], ordinal)
}

// Empty reports whether the batch holds no mark.
func (b *MarkBatch) Empty() bool { return b == nil || len(b.ids) == 0 }

// Reset empties the batch for the next transaction.
func (b *MarkBatch) Reset() {
	b.ids = b.ids[:0]
	for k := range b.ords {
		delete(b.ords, k)
	}
}

// Each calls fn with every transaction of the batch, in the order first
// seen, and its applied ordinals as inclusive ranges lo, hi, lo, hi, …
// (ordinals arrive in order within a lane, so a serial apply gives one
// range per transaction).
func (b *MarkBatch) Each(fn func(id chain.Identity, ranges []uint32) error) error {
	if b == nil {
		return nil
	}
	for _, id := range b.ids {
		if err := fn(id, Ranges(b.ords[id])); err != nil {
			return err
		}
	}
	return nil
}

// Ranges turns ascending ordinals into inclusive ranges lo, hi, lo, hi, ….
func Ranges(ords []uint32) []uint32 {
	out := make([]uint32, 0, 2)
	for i, o := range ords {
		if i > 0 && o == out[len(out)-1]+1 {
			out[len(out)-1] = o
			continue
		}
		out = append(out, o, o)
	}
	return out
}

// RangesJSON renders inclusive ranges lo, hi, lo, hi, … as the JSON array
// the SQLite and MySQL targets store a mark's ordinals in.
func RangesJSON(ranges []uint32) string {
	buf := make([]byte, 0, 2+len(ranges)*6)
	buf = append(buf, '[')
	for i, r := range ranges {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendUint(buf, uint64(r), 10)
	}
	return string(append(buf, ']'))
}

// ParseRangesJSON reads what RangesJSON writes, refusing an odd count, a
// bound out of range and a range whose end is before its start.
func ParseRangesJSON(text string) ([]uint32, error) {
	var raw []int64
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("ranges: %w", err)
	}
	if len(raw)%2 != 0 {
		return nil, errors.New("ranges: an odd number of bounds")
	}
	out := make([]uint32, len(raw))
	for i, r := range raw {
		if r < 0 || r > math.MaxUint32 || (i%2 == 1 && r < raw[i-1]) {
			return nil, fmt.Errorf("ranges: bound %d out of order or range", r)
		}
		out[i] = uint32(r)
	}
	return out, nil
}
