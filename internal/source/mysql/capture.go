package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

// heartbeat is how often the server sends a heartbeat on a quiet binlog;
// a read that hears nothing for readTimeout counts the connection as lost.
const (
	heartbeat   = 2 * time.Second
	readTimeout = 5 * heartbeat
	// pollEvery bounds one wait for an event, so limits, Stop and Tick are
	// looked at while the binlog is quiet.
	pollEvery = time.Second
)

// capture reads a chain's binlog as a replica of the source, one window
// of whole transactions at a time.
type capture struct {
	c        *conf
	o        source.CaptureOptions
	srv      server
	serverID uint32
	owner    string
	db       *sql.DB
	syncer   *replication.BinlogSyncer
	stream   *replication.BinlogStreamer
	track    *tracker

	// pos is where the next window starts: after the last transaction
	// delivered. read is where the stream stands (after the last event).
	pos, read position
	// tag names the server in the positions read here when it is not the
	// chain's own (position.server); "" on the chain's own server.
	tag   string
	gtids gomysql.GTIDSet
	// ended is set after a Before window: the capture is done.
	ended bool
}

// ownerTag is the report host a capture registers with: the owner's
// name, hashed to fit, so a later attempt of the same owner knows its
// dead predecessor's registration.
func ownerTag(owner string) string {
	if owner == "" {
		return "sluice"
	}
	sum := sha256.Sum256([]byte(owner))
	return "sluice-" + hex.EncodeToString(sum[:6])
}

// syncerConfig is the binlog reader's configuration.
func syncerConfig(c *conf, srv server, id uint32, owner string) replication.BinlogSyncerConfig {
	cfg := replication.BinlogSyncerConfig{
		ServerID:                id,
		Flavor:                  srv.flavor(),
		Host:                    c.host,
		Port:                    c.port,
		User:                    c.sql.User,
		Password:                c.sql.Passwd,
		Localhost:               owner,
		ParseTime:               false,
		TimestampStringLocation: time.UTC,
		HeartbeatPeriod:         heartbeat,
		ReadTimeout:             readTimeout,
		DisableRetrySync:        true,
		Logger:                  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if c.sql.TLS != nil {
		cfg.TLSConfig = c.sql.TLS
	}
	if c.sql.Net == "unix" {
		cfg.Dialer = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.sql.Addr)
		}
	}
	return cfg
}

// checkReplication registers as a replica for a moment and reads the
// binlog's first event, which needs REPLICATION SLAVE: a full that could
// never be followed by an incremental is refused before it copies a row.
func checkReplication(ctx context.Context, c *conf, srv server, id uint32) error {
	syncer := replication.NewBinlogSyncer(syncerConfig(c, srv, id, ownerTag("")))
	defer syncer.Close()
	var file string
	var off uint64
	db, err := connect(ctx, c, 1)
	if err != nil {
		return err
	}
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err == nil {
		for rows.Next() {
			var size uint64
			cols, _ := rows.Columns()
			dest := []any{&file, &size}
			for len(dest) < len(cols) {
				dest = append(dest, new(sql.RawBytes))
			}
			if err := rows.Scan(dest...); err != nil {
				break
			}
			off = 4
		}
		rows.Close()
	}
	db.Close()
	if file == "" {
		return errcode.New(errcode.SourceLogConfig, "the source lists no binlog: log_bin is off")
	}
	stream, err := syncer.StartSync(gomysql.Position{Name: file, Pos: uint32(off)})
	if err != nil {
		return replicationError(err, "start reading the binlog")
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := stream.GetEvent(rctx); err != nil {
		return replicationError(err, "read the binlog")
	}
	return nil
}

// replicationError codes an error of the binlog dump: a missing
// REPLICATION SLAVE privilege refuses, a purged binlog is lost.
func replicationError(err error, what string) error {
	var me *gomysql.MyError
	if errors.As(err, &me) {
		switch me.Code {
		case erSpecificAccess, erDBAccessDenied, erAccessDenied:
			// The same user connects for SQL, so a denied registration or
			// dump is the missing privilege, not a wrong password.
			return &errcode.Error{Code: errcode.SourcePrivileges, Err: err, Hint: privilegesHint,
				Message: "the source user may not read the binlog as a replica (" + what + " needs REPLICATION SLAVE)"}
		case erMasterFatalReading:
			if strings.Contains(me.Message, "not in the master's binlog") {
				return errcode.Wrap(errcode.SourceGTIDBehind, err, "the server's binlog does not hold the chain's GTID position")
			}
			if strings.Contains(strings.ToLower(me.Message), "could not find first log file") || strings.Contains(me.Message, "purged") {
				return errcode.Wrap(errcode.SourceLogLost, err, "the source no longer holds the binlog the chain's position is in")
			}
			if strings.Contains(strings.ToLower(me.Message), "server_id") || strings.Contains(strings.ToLower(me.Message), "server id") {
				return errcode.Wrap(errcode.SourceServerIDClash, err, "the source refused the replica server ID")
			}
		}
	}
	if strings.Contains(err.Error(), "1236") && strings.Contains(strings.ToLower(err.Error()), "first log file") {
		return errcode.Wrap(errcode.SourceLogLost, err, "the source no longer holds the binlog the chain's position is in")
	}
	return classify(err, what)
}

// openCapture opens a capture at o.Start.
func openCapture(ctx context.Context, c *conf, o source.CaptureOptions) (*capture, error) {
	if o.Source.Engine != EngineName {
		return nil, errcode.New(errcode.ConfigInvalid, "the chain's source engine is %q, not %s", o.Source.Engine, EngineName)
	}
	start, err := parsePosition(o.Start)
	if err != nil {
		return nil, errcode.Wrap(errcode.ChainInvalid, err, "the chain's tip position")
	}
	id := c.serverID
	if id == 0 {
		var ok bool
		if id, ok = slotServerID(o.Source.Slot); !ok {
			return nil, errcode.New(errcode.SourceAnchorMissing, "the chain records no replica server ID (source slot %q); give the DSN a server_id=N parameter", o.Source.Slot).Was(errcode.SlotMissing)
		}
	}
	db, err := connect(ctx, c, 2)
	if err != nil {
		return nil, err
	}
	cp := &capture{c: c, o: o, serverID: id, owner: ownerTag(o.Owner), db: db, pos: start, read: start}
	ok := false
	defer func() {
		if !ok {
			cp.Close()
		}
	}()
	if cp.srv, err = readServer(ctx, db); err != nil {
		return nil, err
	}
	byGTID, err := cp.resumeMode(start)
	if err != nil {
		return nil, err
	}
	if err := checkLogSettings(ctx, db, cp.srv); err != nil {
		return nil, err
	}
	if byGTID {
		if err := cp.checkHoldsPosition(ctx, start); err != nil {
			return nil, err
		}
		// The file and offset are another server's: nothing is known of
		// this server's until its binlog names them (the dump's rotate).
		cp.read = position{gtid: start.gtid, server: cp.tag}
	} else if _, err := cp.LogHealth(ctx); err != nil {
		return nil, err
	}
	if err := checkServerID(ctx, db, cp.srv, id, cp.ownerIfAny()); err != nil {
		if e, ok := errcode.As(err); ok && e.Code == errcode.SourceServerIDClash && c.serverID == 0 && strings.Contains(e.Message, `"sluice`) {
			// The chain's own replica ID, registered by another sluice
			// reader: a second producer on this chain.
			return nil, &errcode.Error{Code: errcode.SourceReaderInUse, Formerly: errcode.SlotInUse, Err: err,
				Message: fmt.Sprintf("another reader of this chain's binlog is connected to the source as replica server_id %d", id),
				Hint:    "Run one producer per chain: stop the other one (sluice backup stream stop), or wait for it to end; SHOW SLAVE HOSTS on the source lists it."}
		}
		return nil, err
	}
	if cp.gtids, err = gomysql.ParseGTIDSet(cp.srv.flavor(), start.gtid); err != nil {
		return nil, errcode.Wrap(errcode.ChainInvalid, err, "the chain's tip GTID position %q", start.gtid)
	}
	schema := o.Schema
	if schema == nil {
		schema = &chain.Schema{}
	}
	cp.track = newTracker(db, c.database, schema, o.Filter, newFixedValues(db))
	cp.syncer = replication.NewBinlogSyncer(syncerConfig(c, cp.srv, id, cp.owner))
	if byGTID {
		cp.stream, err = cp.syncer.StartSyncGTID(cp.gtids.Clone())
	} else {
		cp.stream, err = cp.syncer.StartSync(gomysql.Position{Name: start.file, Pos: start.offset})
	}
	if err != nil {
		return nil, replicationError(err, "start reading the binlog at "+start.String())
	}
	ok = true
	return cp, nil
}

// ownerIfAny is the tag a registration of a dead attempt of the same owner
// carries ("" when the capture has no owner: every holder is refused).
func (c *capture) ownerIfAny() string {
	if c.o.Owner == "" {
		return ""
	}
	return c.owner
}

// Close ends the session.
func (c *capture) Close() {
	if c.syncer != nil {
		c.syncer.Close()
		c.syncer = nil
	}
	if c.db != nil {
		c.db.Close()
		c.db = nil
	}
}

// Confirm records nothing on the server: a MySQL-family source keeps no
// slot, and the binlog position in the catalog is the chain's position.
func (c *capture) Confirm(context.Context, string) error { return nil }

// CurrentPosition reads the server's current binlog position.
func (c *capture) CurrentPosition(ctx context.Context) (string, error) {
	p, err := currentPosition(ctx, c.db, c.srv)
	if err != nil {
		return "", err
	}
	p.server = c.tag
	return p.String(), nil
}

func currentPosition(ctx context.Context, db *sql.DB, srv server) (position, error) {
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return position{}, classify(err, "read the source's binlog position")
	}
	defer rows.Close()
	if !rows.Next() {
		return position{}, errcode.New(errcode.SourceLogConfig, "the source reports no binlog position: log_bin is off")
	}
	cols, _ := rows.Columns()
	var p position
	var off uint64
	dest := []any{&p.file, &off}
	var gtid sql.NullString
	for i := 2; i < len(cols); i++ {
		if strings.EqualFold(cols[i], "Executed_Gtid_Set") {
			dest = append(dest, &gtid)
		} else {
			dest = append(dest, new(sql.RawBytes))
		}
	}
	if err := rows.Scan(dest...); err != nil {
		return position{}, classify(err, "read the source's binlog position")
	}
	rows.Close()
	p.offset = uint32(off)
	if srv.mariadb {
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&p.gtid); err != nil {
			return position{}, classify(err, "read the source's GTID position")
		}
	} else {
		p.gtid = strings.ReplaceAll(gtid.String, "\n", "")
	}
	return p, nil
}

// LogHealth reads whether the server still holds the binlog from the
// capture's position on: lost when its file is gone, at risk when the file
// is the oldest the server keeps and binlogs expire (the next purge takes
// it), ok otherwise. RetainedBytes is the binlog from the position to the
// server's end.
func (c *capture) LogHealth(ctx context.Context) (source.LogHealth, error) {
	at := c.pos
	if at.server != c.tag {
		// The chain's position is another server's (a failover followed
		// by GTID): this server's binlog is read from where the stream
		// stands, once its dump has named the file.
		if c.read.file == "" {
			return source.LogHealth{State: source.LogOK, WalStatus: "retained", Confirmed: c.pos.String(), Active: true}, nil
		}
		at = c.read
	}
	return binlogHealth(ctx, c.db, at)
}

func binlogHealth(ctx context.Context, db *sql.DB, at position) (source.LogHealth, error) {
	h := source.LogHealth{Confirmed: at.String()}
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return h, checkBinlogAccessErr(err)
	}
	type logFile struct {
		name string
		size int64
	}
	var files []logFile
	for rows.Next() {
		var f logFile
		cols, _ := rows.Columns()
		dest := []any{&f.name, &f.size}
		for len(dest) < len(cols) {
			dest = append(dest, new(sql.RawBytes))
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return h, classify(err, "list the source's binlogs")
		}
		files = append(files, f)
	}
	rows.Close()
	idx := -1
	for i, f := range files {
		if f.name == at.file {
			idx = i
		}
	}
	if idx < 0 {
		h.State, h.WalStatus = source.LogLost, "purged"
		oldest := "none"
		if len(files) > 0 {
			oldest = files[0].name
		}
		return h, errcode.New(errcode.SourceLogLost, "the source no longer holds binlog %s, where the chain's position %s is (its oldest binlog is %s)", at.file, at, oldest)
	}
	for i := idx; i < len(files); i++ {
		h.RetainedBytes += files[i].size
	}
	h.RetainedBytes -= int64(at.offset)
	var expire int64
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.binlog_expire_logs_seconds").Scan(&expire); err != nil {
		expire = 0
	}
	h.State, h.WalStatus = binlogState(idx, len(files), expire)
	return h, nil
}

// binlogState judges the binlog holding the chain's position, the idx-th
// of the files the server keeps: at risk when it is the oldest of several
// and binlogs expire (the next purge takes it), ok otherwise.
func binlogState(idx, files int, expireSeconds int64) (source.LogState, string) {
	if idx == 0 && expireSeconds > 0 && files > 1 {
		return source.LogAtRisk, "oldest"
	}
	return source.LogOK, "retained"
}

func checkBinlogAccessErr(err error) error {
	if errcode.Is(classify(err, ""), errcode.SourcePrivileges) {
		return &errcode.Error{Code: errcode.SourcePrivileges, Err: err, Hint: privilegesHint,
			Message: "the source user may not list the binlogs (SHOW BINARY LOGS needs REPLICATION CLIENT, named BINLOG MONITOR on MariaDB 10.5 and later)"}
	}
	return classify(err, "list the source's binlogs")
}

// The statements a capture reads from query events.
var (
	truncateStmt = regexp.MustCompile("(?is)^\\s*truncate\\s+(?:table\\s+)?((?:`(?:[^`]|``)+`|[^\\s.;]+)(?:\\s*\\.\\s*(?:`(?:[^`]|``)+`|[^\\s.;]+))?)")
	dmlStmt      = regexp.MustCompile(`(?is)^\s*(insert|update|delete|replace|load\s+data)\b`)
	xaStmt       = regexp.MustCompile(`(?is)^\s*xa\s+(start|begin|end|prepare|commit|rollback)\s+(.*?)\s*(one\s+phase)?\s*;?\s*$`)
	savepoint    = regexp.MustCompile(`(?is)^\s*(savepoint|rollback\s+to|release\s+savepoint)\b`)
)

// openTx is the source transaction being read.
type openTx struct {
	gtid       string
	standalone bool
	began      bool // its Begin record went to the sink
	ordinal    uint32
	start      position
	commitTime int64
	// xa is set while reading an XA transaction's prepared part: its
	// changes are held until XA COMMIT (delivered) or XA ROLLBACK.
	xa string
}

// heldXA is a prepared XA transaction waiting for its outcome.
type heldXA struct {
	changes []*chain.Change
}
