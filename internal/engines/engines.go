// Package engines links every source and target engine and every remote
// backup store into a binary: importing it (for its side effects) registers
// each engine and store with its registry, so the worker, the CLI and tests
// open engines by driver name and stores by URL scheme and never import an
// engine or store package themselves. Only main packages and tests import
// it: the neutral core links no cloud SDK (internal/engines/deps_test.go).
package engines

import (
	// azblob:// stores (Azure Blob Storage).
	_ "github.com/sluicehq/sluice/internal/blobstore/azblob"
	// gs:// stores (Google Cloud Storage).
	_ "github.com/sluicehq/sluice/internal/blobstore/gcs"
	// s3:// stores (AWS S3 and S3-compatible servers).
	_ "github.com/sluicehq/sluice/internal/blobstore/s3"
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
