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
// set), which is what resumes a capture across a failover. It is written
// "mariadb-bin.000003:4567 0-1-812"; on one server, positions order by file
// sequence number, then offset. A file and offset are one server's: a
// position read on a server other than the chain's own (a replica promoted
// after a failover, followed with --follow-failover) names that server
// after an "@": "mariadb-bin.000002:330 0-2-901 @mariadb:db2:3306/2".
type position struct {
	file   string
	offset uint32
	gtid   string
	// server is the system ID of the server the file and offset belong
	// to when it is not the chain's own ("": the chain's own).
	server string
}

// String writes the position as a chain records it.
func (p position) String() string {
	s := p.file + ":" + strconv.FormatUint(uint64(p.offset), 10)
	if p.gtid != "" {
		s += " " + p.gtid
	}
	if p.server != "" {
		s += " @" + p.server
	}
	return s
}

// parsePosition reads a position a chain recorded.
func parsePosition(s string) (position, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return position{}, fmt.Errorf("binlog position %q is not of the form file:offset", s)
	}
	loc := fields[0]
	i := strings.LastIndexByte(loc, ':')
	if i <= 0 {
		return position{}, fmt.Errorf("binlog position %q is not of the form file:offset", s)
	}
	off, err := strconv.ParseUint(loc[i+1:], 10, 32)
	if err != nil {
		return position{}, fmt.Errorf("binlog position %q: offset %w", s, err)
	}
	p := position{file: loc[:i], offset: uint32(off)}
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "@") && p.server == "" && len(f) > 1:
			p.server = f[1:]
		case !strings.HasPrefix(f, "@") && p.gtid == "" && p.server == "":
			p.gtid = f
		default:
			return position{}, fmt.Errorf("binlog position %q: want file:offset, then a GTID position, then @server", s)
		}
	}
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

// comparePositions orders two positions of one server; positions of two
// servers (either side of a failover) have no order.
func comparePositions(a, b string) (int, error) {
	pa, err := parsePosition(a)
	if err != nil {
		return 0, err
	}
	pb, err := parsePosition(b)
	if err != nil {
		return 0, err
	}
	if pa.server != pb.server {
		return 0, fmt.Errorf("binlog positions %q and %q are of two servers: only their GTIDs compare", a, b)
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
