package mysql

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/pitr"
)

// pointForms names the forms of a MySQL-family point, for messages.
const pointForms = "a MariaDB GTID or GTID set such as 0-1-812, a MySQL GTID set such as 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23, or a binlog file:offset such as mariadb-bin.000003:4567"

// mysqlGTID matches the start of a MySQL GTID set: a server UUID and a colon.
var mysqlGTID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:`)

// parsePoint reads a point of a MySQL-family chain: a GTID set of either
// flavour, or a binlog file:offset.
func parsePoint(s string) (pitr.Position, error) {
	switch {
	case mysqlGTID.MatchString(s):
		return parseGTIDPoint(gomysql.MySQLFlavor, s)
	case strings.Contains(s, ":"):
		p, err := parsePosition(s)
		if err != nil {
			return nil, err
		}
		if p.gtid != "" {
			return nil, fmt.Errorf("give a binlog file:offset or a GTID set, not both")
		}
		return binlogPoint{lsn: p.lsn(), text: p.String()}, nil
	}
	return parseGTIDPoint(gomysql.MariaDBFlavor, s)
}

// gtidPoint includes every transaction whose GTID the set contains.
type gtidPoint struct {
	flavor string
	set    gomysql.GTIDSet
}

func parseGTIDPoint(flavor, s string) (pitr.Position, error) {
	set, err := gomysql.ParseGTIDSet(flavor, s)
	if err != nil {
		return nil, fmt.Errorf("GTID set %q: %w", s, err)
	}
	if set.IsEmpty() {
		return nil, fmt.Errorf("GTID set %q is empty", s)
	}
	return gtidPoint{flavor: flavor, set: set}, nil
}

func (p gtidPoint) Includes(c *chain.Change) bool {
	if c.Tx == "" {
		return false
	}
	one, err := gomysql.ParseGTIDSet(p.flavor, c.Tx)
	return err == nil && p.set.Contain(one)
}

// Compare places the set against the GTID set a chain position records
// with its binlog location: equal sets compare equal, a set the position
// contains comes before it, any other after it.
func (p gtidPoint) Compare(pos string) (int, error) {
	at, err := parsePosition(pos)
	if err != nil {
		return 0, err
	}
	set, err := gomysql.ParseGTIDSet(p.flavor, at.gtid)
	if err != nil {
		return 0, fmt.Errorf("the chain's position %q does not hold a %s GTID set: %w", pos, p.flavor, err)
	}
	switch {
	case set.Equal(p.set):
		return 0, nil
	case set.Contain(p.set):
		return -1, nil
	}
	return 1, nil
}

func (p gtidPoint) String() string { return p.set.String() }

// binlogPoint includes every transaction whose commit event ends at or
// before a binlog file:offset (an offset as SHOW MASTER STATUS or
// mysqlbinlog's "end_log_pos" gives it).
type binlogPoint struct {
	lsn  uint64
	text string
}

func (p binlogPoint) Includes(c *chain.Change) bool { return c.EndLSN <= p.lsn }

func (p binlogPoint) Compare(pos string) (int, error) {
	at, err := parsePosition(pos)
	if err != nil {
		return 0, err
	}
	return cmp.Compare(p.lsn, at.lsn()), nil
}

func (p binlogPoint) String() string { return p.text }

func init() {
	pitr.RegisterPositionParser(EngineName, pointForms, parsePoint)
}
