// Package mysql is the MySQL-family source engine (MariaDB; MySQL 8 by
// version detection): consistent full backups anchored on the exact binlog
// position of their snapshot, and captures that read the binlog with
// go-mysql's BinlogSyncer as a replica would, one window of whole
// transactions at a time. The binlog position is the durable position:
// there is no slot, so a capture confirms nothing to the server and the
// chain's catalog alone records how far the chain reaches.
//
// Every value is carried as the PostgreSQL text form of its neutral kind
// (docs/mysql-source.md), so every target decodes it by kind.
package mysql

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

// EngineName is the engine a MySQL-family chain records
// (chain.SourceInfo.Engine), MariaDB's and MySQL's alike.
const EngineName = "mysql"

// NotCarried is what a MySQL-family chain deliberately does not carry.
const NotCarried = "expression defaults (CURRENT_TIMESTAMP and other functions; constant defaults are carried), AUTO_INCREMENT on a column other than the primary key's first or on a target of another engine (created plain, with the source's values), CHECK and FOREIGN KEY constraints, users and grants (a definer the target lacks is refused or mapped with --object-definer), and DROP TABLE / RENAME TABLE (a dropped or renamed table stays on the target under its old name)"

func init() {
	source.Register(EngineName, dsnForm, openEngine, "mariadb")
	source.RegisterTraits(EngineName, source.Traits{NotCarried: NotCarried, CheckDSN: func(dsn string) error {
		_, err := parseDSN(dsn)
		return err
	}})
}

// engine is a MySQL-family source. Every operation connects for its own
// duration.
type engine struct {
	dsn string
	c   *conf
}

var (
	_ source.Source  = (*engine)(nil)
	_ source.Capture = (*capture)(nil)
)

// OptionFollowFailover ("true") lets a capture read a server other than
// the chain's own: a replica promoted after a failover, resumed by GTID
// once its binlog is known to hold everything the chain does
// (docs/mysql-source.md, "Following a failover"). The CLI's
// --follow-failover sets it.
const OptionFollowFailover = "follow_failover"

// openEngine checks the DSN and the driver's one option: every other
// setting comes from DSN parameters.
func openEngine(_ context.Context, dsn string, options map[string]string) (source.Source, error) {
	var unknown []string
	follow := false
	for k, v := range options {
		if k != OptionFollowFailover {
			unknown = append(unknown, k)
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, errcode.New(errcode.ConfigInvalid, "source option %s=%q is not true or false", k, v)
		}
		follow = b
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, errcode.New(errcode.ConfigInvalid, "source option(s) %s: the mysql driver takes only %s (--publication, --slot-name and --set-replica-identity are PostgreSQL's; give server_id, tls, socket or timeout as DSN parameters)",
			strings.Join(unknown, ", "), OptionFollowFailover)
	}
	c, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	c.followFailover = follow
	return &engine{dsn: dsn, c: c}, nil
}

func (e *engine) Engine() string { return EngineName }

func (e *engine) Close() {}

// FullBackup takes a consistent snapshot and commits it as the chain's
// first full.
func (e *engine) FullBackup(ctx context.Context, ch *chain.Chain, o source.FullOptions) (*chain.Manifest, error) {
	if err := source.RefuseExistingChain(ctx, ch); err != nil {
		return nil, err
	}
	m, cleanup, err := e.snapshot(ctx, ch, o, nil)
	if err != nil {
		return nil, err
	}
	if err := source.CommitFirstFull(ctx, ch, m, cleanup); err != nil {
		return nil, err
	}
	return m, nil
}

// RotationFull takes a new full of the chain's source; the caller commits
// it.
func (e *engine) RotationFull(ctx context.Context, ch *chain.Chain, o source.FullOptions, src chain.SourceInfo) (*chain.Manifest, func(), error) {
	return e.snapshot(ctx, ch, o, &src)
}

// OpenCapture opens a binlog reader at the chain's tip.
func (e *engine) OpenCapture(ctx context.Context, o source.CaptureOptions) (source.Capture, error) {
	return openCapture(ctx, e.c, o)
}
