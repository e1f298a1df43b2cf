package chain

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// ParseLSN reads a PostgreSQL log position written as two hexadecimal
// halves, "16/B374D848".
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("log position %q is not of the form X/X", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("log position %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("log position %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// FormatLSN writes a PostgreSQL log position as PostgreSQL prints it.
func FormatLSN(lsn uint64) string { return fmt.Sprintf("%X/%X", lsn>>32, uint32(lsn)) }

// PositionOrder compares two positions of one source engine: negative when
// a comes before b, zero when they name the same point, positive after. A
// position the engine cannot read is an error.
type PositionOrder func(a, b string) (int, error)

var positionOrders = struct {
	sync.RWMutex
	of   map[string]PositionOrder
	lsns map[string]positionLSN
}{
	of:   map[string]PositionOrder{"postgres": compareLSNs},
	lsns: map[string]positionLSN{"postgres": {parse: ParseLSN, format: FormatLSN}},
}

// positionLSN reads an engine's position as the 64 bits its change
// records carry in LSN and EndLSN, and writes those bits for messages.
type positionLSN struct {
	parse  func(string) (uint64, error)
	format func(uint64) string
}

// RegisterPositionLSN defines, for a source engine whose change records
// carry their log positions packed in LSN and EndLSN, how a manifest's
// position string reads as those bits and how the bits are written in
// messages. The severed-transaction check then compares an incremental's
// end position with where its last transaction ends (shape C), as it does
// for PostgreSQL's LSNs.
func RegisterPositionLSN(engine string, parse func(string) (uint64, error), format func(uint64) string) {
	positionOrders.Lock()
	defer positionOrders.Unlock()
	positionOrders.lsns[engine] = positionLSN{parse: parse, format: format}
}

// lsnOf returns how an engine's positions read as record LSNs; ok is false
// for an engine whose records carry none.
func lsnOf(engine string) (positionLSN, bool) {
	positionOrders.RLock()
	defer positionOrders.RUnlock()
	p, ok := positionOrders.lsns[engine]
	return p, ok
}

// RegisterPositionOrder defines how positions of a source engine (the
// manifest's source.engine) compare. PostgreSQL's log sequence numbers are
// defined here; other engines register theirs from their own package.
func RegisterPositionOrder(engine string, order PositionOrder) {
	positionOrders.Lock()
	defer positionOrders.Unlock()
	positionOrders.of[engine] = order
}

// ComparePositions compares two positions of engine. ok is false when the
// engine defines no order (then only equal strings are known to be equal).
func ComparePositions(engine, a, b string) (cmp int, ok bool, err error) {
	positionOrders.RLock()
	order := positionOrders.of[engine]
	positionOrders.RUnlock()
	if order == nil {
		return 0, false, nil
	}
	cmp, err = order(a, b)
	return cmp, err == nil, err
}

// SamePosition reports whether two positions of engine name the same point:
// equal strings, or positions the engine's order finds equal.
func SamePosition(engine, a, b string) bool {
	if a == b {
		return true
	}
	cmp, ok, _ := ComparePositions(engine, a, b)
	return ok && cmp == 0
}

func compareLSNs(a, b string) (int, error) {
	la, err := ParseLSN(a)
	if err != nil {
		return 0, err
	}
	lb, err := ParseLSN(b)
	if err != nil {
		return 0, err
	}
	switch {
	case la < lb:
		return -1, nil
	case la > lb:
		return 1, nil
	}
	return 0, nil
}
