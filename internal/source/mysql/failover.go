package mysql

import (
	"context"
	"fmt"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// A binlog file and offset name a place on one server only; a GTID names
// a transaction on every server of a replication topology. A capture
// resumes by file and offset when the chain's position was read on the
// server it connected to, and by GTID otherwise: after a failover, the
// chain goes on from a promoted replica (OptionFollowFailover) once that
// server's binlog is known to hold everything the chain holds.

// serverTag is the tag of positions read on the server here for a chain
// taken from chainSrc: "" when it is the chain's own server, its system ID
// when it is another one the chain may follow a failover to (follow set,
// same engine and database). Any other server is refused with
// SLUICE-E-SOURCE-MISMATCH, whose hint names --follow-failover when the
// flag would have let it in.
func serverTag(chainSrc, here chain.SourceInfo, follow bool) (string, error) {
	err := sameSource(chainSrc, here)
	if err == nil {
		return "", nil
	}
	sameData := chainSrc.Engine == here.Engine && chainSrc.Database == here.Database
	if follow && sameData {
		return here.SystemID, nil
	}
	if sameData {
		err.Hint = "Point --source at the chain's source. If the chain's server failed over to this one (a replica promoted with log_slave_updates=ON), run with --follow-failover to resume by GTID; otherwise start a new chain for this database with `sluice backup full`."
	}
	return "", err
}

// resumeMode decides how the capture resumes at start on the server it
// connected to, and sets the server tag of the positions it reads there.
// byGTID is false when start is a position of this server. A server other
// than the chain's own is refused without OptionFollowFailover, as is a
// position recorded on another server.
func (c *capture) resumeMode(start position) (byGTID bool, err error) {
	here := chain.SourceInfo{Engine: EngineName, SystemID: c.srv.systemID, Database: c.c.database}
	if c.tag, err = serverTag(c.o.Source, here, c.c.followFailover); err != nil {
		return false, err
	}
	switch {
	case start.server == c.tag:
		return false, nil
	case !c.c.followFailover:
		return false, &errcode.Error{Code: errcode.SourceMismatch,
			Message: fmt.Sprintf("the chain's position %s was read on server %s after a failover, not on this server (%s)", start, start.server, c.srv.systemID),
			Hint:    "Run with --follow-failover: the capture resumes by the position's GTID on this server once its binlog is known to hold it."}
	}
	return true, nil
}

// checkHoldsPosition refuses a server whose binlog does not reach the
// chain's GTID position start: resuming there would skip what the server
// never logged, or read a history the chain does not continue.
func (c *capture) checkHoldsPosition(ctx context.Context, start position) error {
	if start.gtid == "" {
		return errcode.New(errcode.SourceGTIDBehind, "the chain's position %s records no GTID: only a GTID resumes the chain on another server (%s)", start, c.srv.systemID)
	}
	want, err := gomysql.ParseGTIDSet(c.srv.flavor(), start.gtid)
	if err != nil {
		return errcode.Wrap(errcode.ChainInvalid, err, "the chain's tip GTID position %q", start.gtid)
	}
	query := "SELECT @@GLOBAL.gtid_executed"
	if c.srv.mariadb {
		query = "SELECT @@GLOBAL.gtid_binlog_pos"
	}
	var got string
	if err := c.db.QueryRowContext(ctx, query).Scan(&got); err != nil {
		return classify(err, "read the server's GTID position")
	}
	have, err := gomysql.ParseGTIDSet(c.srv.flavor(), got)
	if err != nil {
		return fmt.Errorf("read server %s's GTID position %q: %w", c.srv.systemID, got, err)
	}
	if have.Contain(want) {
		return nil
	}
	msg := fmt.Sprintf("server %s's binlog reaches GTID position %q; the chain holds transactions up to %q, which it lacks", c.srv.systemID, got, start.gtid)
	if c.srv.mariadb {
		var logReplicated bool
		if err := c.db.QueryRowContext(ctx, "SELECT @@GLOBAL.log_slave_updates").Scan(&logReplicated); err == nil && !logReplicated {
			msg += " (log_slave_updates is OFF: what it applied as a replica is not in its binlog)"
		}
	}
	return errcode.New(errcode.SourceGTIDBehind, "%s", msg)
}
