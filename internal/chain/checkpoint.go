package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

const (
	commitPrefix     = CatalogPrefix + "commit-"
	checkpointPrefix = CatalogPrefix + "checkpoint-"
)

// CommitKey returns the key of the commit that makes generation gen of a
// chain of catalog format 3.
func CommitKey(gen int64) string { return fmt.Sprintf("%s%020d.json", commitPrefix, gen) }

// CheckpointKey returns the key of the checkpoint holding the whole
// catalog at generation gen.
func CheckpointKey(gen int64) string { return fmt.Sprintf("%s%020d.json", checkpointPrefix, gen) }

// parseNumberedKey returns the generation a key made of prefix, 20 digits
// and ".json" names.
func parseNumberedKey(key, prefix string) (int64, bool) {
	s, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".json")
	if !ok || len(s) != 20 {
		return 0, false
	}
	gen, err := strconv.ParseInt(s, 10, 64)
	return gen, err == nil && gen >= 1
}

// CheckpointPolicy says when a commit is followed by a checkpoint: once
// Every commits or Bytes of commits (whichever comes first) follow the
// newest checkpoint. A loader reads at most about that much past a
// checkpoint.
type CheckpointPolicy struct {
	Every int64
	Bytes int64
}

// DefaultCheckpointPolicy is the policy a Chain starts with. Every was
// measured with BenchmarkCheckpointEvery (docs/chain-format.md §2.3): a load
// reads one checkpoint and up to Every commits one after another, so Every
// bounds a load's requests, while a checkpoint (its page references and up
// to a page of links) is written once per Every commits.
var DefaultCheckpointPolicy = CheckpointPolicy{Every: 100, Bytes: 1 << 20}

// SetCheckpointPolicy changes when c's commits write checkpoints. A zero
// field takes the default's. It is meant for tests and benchmarks; call it
// before c is used.
func (c *Chain) SetCheckpointPolicy(p CheckpointPolicy) {
	if p.Every <= 0 {
		p.Every = DefaultCheckpointPolicy.Every
	}
	if p.Bytes <= 0 {
		p.Bytes = DefaultCheckpointPolicy.Bytes
	}
	c.policy = &p
}

func (c *Chain) checkpointPolicy() CheckpointPolicy {
	if c.policy != nil {
		return *c.policy
	}
	return DefaultCheckpointPolicy
}

// catalogCheckpoint is the stored form of a checkpoint: the whole catalog at
// Generation and the hash of that generation's stored bytes, which the
// next commit names as its Prev.
type catalogCheckpoint struct {
	FormatVersion int    `json:"format_version"`
	ChainID       string `json:"chain_id"`
	Generation    int64  `json:"generation"`
	// Commit is the SHA-256 of the stored bytes of generation Generation
	// (its commit, or a whole generation of format 1 or 2).
	Commit    string              `json:"commit_sha256"`
	CreatedAt time.Time           `json:"created_at"`
	Source    SourceInfo          `json:"source"`
	Segments  []checkpointSegment `json:"segments"`
	// Signature, when the producer signs, covers the checkpoint's encoding
	// without it, and so (through page hashes) every link it lists.
	Signature *CatalogSignature `json:"signature,omitempty"`
}

// writeCheckpoint writes the checkpoint of cat, whose stored state must be
// known, create-only. An existing checkpoint of the same generation holds
// the same catalog (generations are immutable while they can be
// checkpointed), so finding one is success.
func (c *Chain) writeCheckpoint(ctx context.Context, cat *Catalog, hash string, pages *pageSet) error {
	if pages == nil {
		pages = &pageSet{}
	}
	segs, err := c.pagedSegments(ctx, cat, pages)
	if err != nil {
		return err
	}
	cp := catalogCheckpoint{FormatVersion: CatalogFormatVersionCommits, ChainID: cat.ChainID, Generation: cat.Generation,
		Commit: hash, CreatedAt: NormalizeTime(time.Now()), Source: cat.Source, Segments: segs}
	if cp.Signature, err = c.sign(signCheckpoint, &cp); err != nil {
		return err
	}
	data, err := json.Marshal(&cp)
	if err != nil {
		return fmt.Errorf("encode checkpoint %d: %w", cat.Generation, err)
	}
	key := CheckpointKey(cat.Generation)
	if err := c.store.PutIfAbsent(ctx, key, append(data, '\n')); err != nil && !errors.Is(err, blobstore.ErrExists) {
		return c.unreachable(err, "write", key)
	}
	return nil
}

// readCheckpoint reads the checkpoint of generation gen and its pages
// (adding them to pages); nil, nil when it does not exist.
func (c *Chain) readCheckpoint(ctx context.Context, gen int64, pages *pageSet) (*Catalog, string, bool, error) {
	key := CheckpointKey(gen)
	data, err := blobstore.ReadAll(ctx, c.store, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, c.unreachable(err, "read", key)
	}
	var cp catalogCheckpoint
	if err := strictUnmarshal(data, &cp); err != nil {
		return nil, "", false, errcode.Wrap(errcode.ManifestInvalid, err, "catalog checkpoint %s does not parse", key)
	}
	if cp.FormatVersion != CatalogFormatVersionCommits {
		return nil, "", false, errcode.New(errcode.FormatUnsupported,
			"catalog checkpoint %s has format version %d; this sluice reads version %d", key, cp.FormatVersion, CatalogFormatVersionCommits)
	}
	if cp.Generation != gen {
		return nil, "", false, errcode.New(errcode.ChainInvalid, "catalog checkpoint %s holds generation %d", key, cp.Generation)
	}
	if !validDigest(cp.Commit) {
		return nil, "", false, errcode.New(errcode.ChainInvalid, "catalog checkpoint %s: commit hash %q is not a SHA-256", key, cp.Commit)
	}
	sig := cp.Signature
	cp.Signature = nil
	signed, err := c.verify(signCheckpoint, key, &cp, sig)
	if err != nil {
		return nil, "", false, err
	}
	segs, err := c.unpage(ctx, key, cp.Segments, pages)
	if err != nil {
		return nil, "", false, err
	}
	cat := &Catalog{FormatVersion: CatalogFormatVersionCommits, ChainID: cp.ChainID, Generation: cp.Generation,
		Source: cp.Source, Segments: segs, tail: new(atomic.Bool)}
	if err := ValidateCatalog(cat); err != nil {
		return nil, "", false, fmt.Errorf("catalog checkpoint %s: %w", key, err)
	}
	return cat, cp.Commit, signed, nil
}

// listNumbered lists the objects under prefix whose keys carry a
// generation, in increasing generation order.
func (c *Chain) listNumbered(ctx context.Context, prefix string) ([]numberedObject, error) {
	objs, err := c.store.List(ctx, prefix)
	if err != nil {
		return nil, c.unreachable(err, "list", prefix)
	}
	var out []numberedObject
	for _, o := range objs {
		if gen, ok := parseNumberedKey(o.Key, prefix); ok {
			out = append(out, numberedObject{gen: gen, info: o})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gen < out[j].gen })
	return out, nil
}

type numberedObject struct {
	gen  int64
	info blobstore.ObjectInfo
}

func validDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
