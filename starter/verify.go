package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// verifyReport is what `backup verify-chain --json` prints.
type verifyReport struct {
	Chain        string          `json:"chain"`
	ChainID      string          `json:"chain_id"`
	Generation   int64           `json:"generation"`
	Segments     int             `json:"segments"`
	Links        int             `json:"links"`
	Incrementals int             `json:"incrementals"`
	Findings     []verifyFinding `json:"findings"`
}

// verifyFinding is one finding as printed by `--json`.
type verifyFinding struct {
	Shape     string   `json:"shape"`
	Code      string   `json:"code"`
	Links     []string `json:"links"`
	XID       uint32   `json:"xid,omitempty"`
	CommitLSN string   `json:"commit_lsn,omitempty"`
	Detail    string   `json:"detail"`
}

func (c *cli) verifyChainCmd() *cobra.Command {
	var store storeFlags
	var target string
	var asJSON, allChunks bool
	cmd := &cobra.Command{
		Use:   "verify-chain",
		Short: "Check a chain for severed transactions (reads the store directly; no worker needed)",
		Long: `Reads the chain's catalog, validates it, checks every manifest against it, then
looks for severed transactions in every incremental: a source transaction split
between two incrementals (shape A), one delivered twice by a resume (shape B), or
an incremental whose end position lies past its stored changes (shape C). Every
finding is printed. The recorded schema of every link is checked first with the
validators every target runs (SLUICE-E-CHAIN-SCHEMA-REFUSED; --chunks also
checks each schema change record). The severed check reads each incremental's first and last
chunks; --chunks also reads every chunk of every link and checks its SHA-256.
Exit 0: clean; exit 3: findings (the code of the first one), or a damaged
catalog, manifest or chunk.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--target", target)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ch, err := openChainHere(ctx, st)
			if err != nil {
				return err
			}
			cat, err := ch.LoadCatalog(ctx)
			if err != nil {
				return err
			}
			if err := chain.ValidateCatalog(cat); err != nil {
				return err
			}
			if err := ch.Verify(ctx, cat, ""); err != nil {
				return err
			}
			if _, err := checkChainSchemas(ctx, ch, cat, allChunks); err != nil {
				return err
			}
			if allChunks {
				n, err := verifyEveryChunk(ctx, ch, cat)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.stderr, "%d chunks read: every SHA-256 matches and every chunk decodes\n", n)
			}
			findings, err := ch.SeveredTransactions(ctx, cat, nil)
			if err != nil {
				return err
			}
			rep := verifyReport{Chain: st.URL, ChainID: cat.ChainID, Generation: cat.Generation,
				Segments: len(cat.Segments), Findings: []verifyFinding{}}
			for _, l := range cat.Links() {
				rep.Links++
				if l.Kind == chain.KindIncremental {
					rep.Incrementals++
				}
			}
			for _, f := range findings {
				vf := verifyFinding{Shape: f.Shape, Code: string(f.Code()), Links: f.Links, XID: f.XID, Detail: f.Detail}
				if f.CommitLSN != 0 {
					vf.CommitLSN = chain.FormatLSN(f.CommitLSN)
				}
				rep.Findings = append(rep.Findings, vf)
			}
			if asJSON {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(c.stdout, string(b))
			} else {
				for _, f := range findings {
					fmt.Fprintf(c.stdout, "%s %s\n", f.Code(), f)
				}
				verdict := "clean: no severed transactions"
				if len(findings) > 0 {
					verdict = fmt.Sprintf("%d finding(s)", len(findings))
				}
				fmt.Fprintf(c.stdout, "chain %s (generation %d): %d segments, %d links, %d incrementals checked; %s\n",
					st.URL, cat.Generation, rep.Segments, rep.Links, rep.Incrementals, verdict)
			}
			if len(findings) == 0 {
				return nil
			}
			first := findings[0]
			return errcode.New(first.Code(), "the chain at %s has %d severed-transaction finding(s); the first: %s", st.URL, len(findings), first)
		},
	}
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysVerify, readHere)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as JSON")
	cmd.Flags().BoolVar(&allChunks, "chunks", false, "also read every chunk of every link, checking its SHA-256 and that it decodes (reads the whole chain)")
	return cmd
}

// verifyEveryChunk reads every chunk the catalog's links name; the first
// damaged one is returned as its coded error.
func verifyEveryChunk(ctx context.Context, ch *chain.Chain, cat *chain.Catalog) (int, error) {
	n := 0
	seen := map[string]bool{} // a compacted segment's chunks hold several links
	for _, l := range cat.Links() {
		m, err := ch.LinkManifest(ctx, cat, l.ID)
		if err != nil {
			return n, err
		}
		refs := m.Chunks
		for _, t := range m.Tables {
			refs = append(refs, t.Chunks...)
		}
		for _, ref := range refs {
			if seen[ref.Key] {
				continue
			}
			seen[ref.Key] = true
			if _, _, err := ch.ReadChunk(ctx, ref); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
