// Package engines links every source and target engine into a binary:
// importing it (for its side effects) registers each engine with its
// registry, so the worker, the CLI and tests open engines by driver name and
// never import an engine package themselves.
package engines

import (
	// MySQL-family sources (MariaDB; MySQL 8 by version detection).
	_ "github.com/sluicehq/sluice/internal/source/mysql"
	// PostgreSQL sources.
	_ "github.com/sluicehq/sluice/internal/source/postgres"
	// MySQL-family targets (MariaDB; MySQL 8 by version detection).
	_ "github.com/sluicehq/sluice/internal/target/mysql"
	// PostgreSQL targets.
	_ "github.com/sluicehq/sluice/internal/target/postgres"
	// SQLite targets.
	_ "github.com/sluicehq/sluice/internal/target/sqlite"
)
