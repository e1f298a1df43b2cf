package mysql

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
)

// position is a place in a MySQL-family source's binlog: the binlog file
// and the offset of the next event in it, with the server's GTID position
// there (MariaDB "domain-server-seq" per domain, or MySQL's executed GTID
// set) for an operator and for a future resume across a failover. It is
// written "mariadb-bin.000003:4567 0-1-812"; on one server, positions
// order by file sequence number, then offset.
type position struct {
	file   string
	offset uint32
	gtid   string
}

// String writes the position as a chain records it.
func (p position) String() string {
	s := p.file + ":" + strconv.FormatUint(uint64(p.offset), 10)
	if p.gtid != "" {
		s += " " + p.gtid
	}
	return s
}

// parsePosition reads a position a chain recorded.
func parsePosition(s string) (position, error) {
	loc, gtid, _ := strings.Cut(s, " ")
	i := strings.LastIndexByte(loc, ':')
	if i <= 0 {
		return position{}, fmt.Errorf("binlog position %q is not of the form file:offset", s)
	}
	off, err := strconv.ParseUint(loc[i+1:], 10, 32)
	if err != nil {
		return position{}, fmt.Errorf("binlog position %q: offset %w", s, err)
	}
	p := position{file: loc[:i], offset: uint32(off), gtid: gtid}
	if _, err := p.sequence(); err != nil {
		return position{}, err
	}
	return p, nil
}

// sequence is the number a binlog file's name ends with.
func (p position) sequence() (uint32, error) {
	dot := strings.LastIndexByte(p.file, '.')
	n, err := strconv.ParseUint(p.file[dot+1:], 10, 32)
	if dot < 0 || err != nil {
		return 0, fmt.Errorf("binlog file %q does not end in a sequence number", p.file)
	}
	return uint32(n), nil
}

// lsn packs the position into 64 bits that order as positions do: the
// file's sequence number above the offset. Change records carry it as
// their LSN and EndLSN, so the severed-transaction check compares an
// incremental's end with where its last transaction ends.
func (p position) lsn() uint64 {
	seq, _ := p.sequence()
	return uint64(seq)<<32 | uint64(p.offset)
}

// comparePositions orders two positions of one server.
func comparePositions(a, b string) (int, error) {
	pa, err := parsePosition(a)
	if err != nil {
		return 0, err
	}
	pb, err := parsePosition(b)
	if err != nil {
		return 0, err
	}
	return cmp.Compare(pa.lsn(), pb.lsn()), nil
}

// positionLSN is a position as the 64 bits change records carry.
func positionLSN(s string) (uint64, error) {
	p, err := parsePosition(s)
	if err != nil {
		return 0, err
	}
	return p.lsn(), nil
}

// formatLSN writes 64 packed bits as "sequence:offset", for messages.
func formatLSN(lsn uint64) string {
	return fmt.Sprintf("file %06d offset %d", lsn>>32, uint32(lsn))
}

func init() {
	chain.RegisterPositionOrder(EngineName, comparePositions)
	chain.RegisterPositionLSN(EngineName, positionLSN, formatLSN)
}
