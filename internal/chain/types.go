// Package chain is the backup chain's format: the catalog (the one commit
// point), manifests with content-derived IDs, row chunks and their codec, and
// the validation that proves a chain can be replayed. docs/chain-format.md is
// the normative description.
package chain

import (
	"sync/atomic"
	"time"
)

// Format versions this package writes and reads.
const (
	// CatalogFormatVersion is the version of catalog generations a chain
	// starts with.
	CatalogFormatVersion = 1
	// CatalogFormatVersionLayouts is the version of a catalog one of whose
	// segments names a layout (a compacted segment); a reader takes both.
	CatalogFormatVersionLayouts = 2
	// CatalogFormatVersionCommits is the version of a chain whose catalog
	// is kept as one small commit per generation plus checkpoints
	// (docs/chain-format.md §2). Every chain this package creates or
	// commits to is of this version; generations of versions 1 and 2 are
	// read forever.
	CatalogFormatVersionCommits = 3
	// ManifestFormatVersion is the version of manifests this package
	// writes. Version 2 defines the apply identity as an opaque transaction
	// ID plus ordinal and orders positions by the source engine; version 1
	// manifests read as ever.
	ManifestFormatVersion = 2
	// ChunkFormatVersion is the version of chunk files this package writes.
	// Version 2 change records may carry an opaque transaction ID; a
	// version 1 chunk reads as ever.
	ChunkFormatVersion = 2
	// OldestFormatVersion is the oldest manifest and chunk version read.
	OldestFormatVersion = 1
)

// Link kinds.
const (
	// KindFull is a full backup: a snapshot of every table, the root of a segment.
	KindFull = "full"
	// KindIncremental is a window of changes read from the source's log.
	KindIncremental = "incremental"
)

// SourceInfo identifies the source database a chain was taken from.
type SourceInfo struct {
	// Engine is "postgres" or "mysql".
	Engine string `json:"engine"`
	// SystemID is the source cluster's identity (PostgreSQL system identifier,
	// MySQL server UUID) so a chain is never fed from another source.
	SystemID string `json:"system_id"`
	// Database is the source database name.
	Database string `json:"database"`
	// Slot is the logical replication slot that anchors the chain, if any.
	Slot string `json:"slot,omitempty"`
}

// ChunkRef names one stored chunk and how to check it.
type ChunkRef struct {
	// Key is the chunk's key relative to the chain root.
	Key string `json:"key"`
	// SHA256 is the lowercase hex SHA-256 of the chunk as stored.
	SHA256 string `json:"sha256"`
	// Size is the stored length in bytes.
	Size int64 `json:"size"`
	// Rows is the number of rows (or change records) in the chunk.
	Rows int64 `json:"rows"`
	// RawSize is the uncompressed body length in bytes.
	RawSize int64 `json:"raw_size"`
	// Span, set only on the chunk references of a link whose records a
	// compacted segment's layout holds (Layout.Apply), restricts the
	// reference to part of a stored chunk: Rows are the span's records,
	// the other fields the stored chunk's. It is never stored.
	Span *ChunkSpan `json:"-"`
	// seal, set on references read from a sealed manifest or layout, is
	// how the stored chunk opens (sealed.go). It is never stored.
	seal *chunkSeal
}

// ChunkSpan is the part of a stored change chunk a link's records take.
type ChunkSpan struct {
	// Skip is how many records of the chunk come before the span.
	Skip int64
	// Total is how many records the stored chunk holds.
	Total int64
}

// TableData lists the chunks holding one table's rows in a full.
type TableData struct {
	// Table is the qualified name "schema.name", as in the schema.
	Table string `json:"table"`
	// Rows is the total row count.
	Rows int64 `json:"rows"`
	// Chunks in order.
	Chunks []ChunkRef `json:"chunks"`
}

// Manifest describes one link of the chain. Its ID is derived from its content
// (see ComputeID), so a reader recomputes and checks it.
type Manifest struct {
	FormatVersion int `json:"format_version"`
	// ID is the content-derived identifier (40 lowercase hex characters).
	ID string `json:"id"`
	// Kind is KindFull or KindIncremental.
	Kind string `json:"kind"`
	// Parent is the ID of the previous link; empty only for a chain's first full.
	Parent string `json:"parent,omitempty"`
	// Source identifies the source database.
	Source SourceInfo `json:"source"`
	// StartPosition is where the link begins in the source's log. For an
	// incremental it equals its parent's EndPosition; for a full it equals
	// EndPosition (the snapshot anchor).
	StartPosition string `json:"start_position"`
	// EndPosition is where the link ends in the source's log.
	EndPosition string `json:"end_position"`
	// CreatedAt is when the producer finished writing the link's data.
	CreatedAt time.Time `json:"created_at"`
	// Schema is the whole recorded schema (full) or the schema after the
	// link's schema changes (incremental; nil when none changed).
	Schema *Schema `json:"schema,omitempty"`
	// Tables holds a full's row chunks per table.
	Tables []TableData `json:"tables,omitempty"`
	// Chunks holds an incremental's change chunks in order.
	Chunks []ChunkRef `json:"chunks,omitempty"`
	// Rows is the total row count of a full.
	Rows int64 `json:"rows,omitempty"`
	// Changes and Transactions count an incremental's change records and source transactions.
	Changes      int64 `json:"changes,omitempty"`
	Transactions int64 `json:"transactions,omitempty"`
	// ApplyIdentity is true when every change that has one carries its source
	// transaction ID and ordinal.
	ApplyIdentity bool `json:"apply_identity,omitempty"`
	// Filters is set on a full whose producer filtered or masked what
	// crossed (--include-table, --exclude-table, --exclude-column, --mask);
	// it holds for the full's whole segment. Nil: everything crossed.
	Filters *Filters `json:"filters,omitempty"`
	// Sequences, set only on an incremental, are the source's sequence
	// counters as its window ended (read at or after the window's last
	// commit), by qualified name: a PostgreSQL source's sequences and a
	// MySQL-family source's tables (their AUTO_INCREMENT counter). Each
	// value is the highest the counter has handed out; only counters that
	// moved since the producer's last record are listed (see
	// docs/chain-format.md §3.3). Nil: none recorded.
	Sequences map[string]int64 `json:"sequences,omitempty"`

	// recordsDigest and layout are set on a manifest a layout was applied
	// to (Layout.Apply); neither is part of the manifest's content.
	recordsDigest string
	layout        string
	// keyID is the data key a sealed manifest was opened with; empty for
	// a plaintext one.
	keyID string
}

// Link is the catalog's entry for one manifest.
type Link struct {
	ID            string    `json:"id"`
	Kind          string    `json:"kind"`
	Parent        string    `json:"parent,omitempty"`
	StartPosition string    `json:"start_position"`
	EndPosition   string    `json:"end_position"`
	CreatedAt     time.Time `json:"created_at"`
	// Rows, Changes and Transactions copy the manifest's counts.
	Rows         int64 `json:"rows,omitempty"`
	Changes      int64 `json:"changes,omitempty"`
	Transactions int64 `json:"transactions,omitempty"`
}

// Segment is a full and the incrementals that follow it.
type Segment struct {
	Full         Link   `json:"full"`
	Incrementals []Link `json:"incrementals,omitempty"`
	// Capped is true once a newer segment follows; a capped segment gains no links.
	Capped bool `json:"capped,omitempty"`
	// Layout names the layout (layouts/<id>.json) that holds the records
	// of this compacted segment's incrementals; empty when none does.
	Layout string `json:"layout,omitempty"`
}

// Catalog is one generation of the chain's catalog: the whole list of
// committed links. A link exists only once a catalog generation names it.
type Catalog struct {
	FormatVersion int `json:"format_version"`
	// ChainID is the ID of the chain's first full.
	ChainID string `json:"chain_id"`
	// Generation increases by one with every commit; the first is 1.
	Generation int64 `json:"generation"`
	// Source identifies the source database.
	Source SourceInfo `json:"source"`
	// Segments in order; only the last may be uncapped.
	Segments []Segment `json:"segments"`

	// parent is the catalog Next made this one from: what CommitCatalog
	// records the change against. Nil once committed or loaded.
	parent *Catalog
	// stored describes how this generation is stored, for catalogs read
	// from or committed to a store; nil otherwise.
	stored *storedState
	// tail guards the spare capacity of the last segment's incrementals:
	// whoever swaps it from false to true may append in place.
	tail *atomic.Bool
}
