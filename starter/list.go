package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chainview"
)

// listReport is what `backup list --json` prints: the store's URL and the
// listing (internal/chainview, documented in docs/operations.md).
type listReport struct {
	Chain string `json:"chain"`
	*chainview.Listing
}

func (c *cli) listCmd() *cobra.Command {
	var store storeFlags
	var target string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a chain's segments and links, and where each broker stands (reads the store directly; no worker needed)",
		Long: `Lists every segment and link of the chain's latest catalog generation: link ID,
kind, start and end positions, when it was written, the commit times of its first
and last source transactions, its transaction, change and row counts, and the
stored size of its chunks. Brokers report where they stand into the store: each
is shown on the last link it fully applied, and how many links it is behind.

Commit times are read from the first and last chunk of each incremental. The
catalog of an encrypted chain is not sealed, so without the chain's key the
links, positions, counts and sizes are listed and the commit times are not.

--json prints one JSON document (field names in docs/operations.md).
Exit 0: listed; exit 3: no chain at the URL or a damaged catalog or manifest.`,
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
			l, err := chainview.List(ctx, ch)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.MarshalIndent(listReport{Chain: st.URL, Listing: l}, "", "  ")
				if err != nil {
					return fmt.Errorf("encode the listing: %w", err)
				}
				_, err = fmt.Fprintln(c.stdout, string(b))
				return err
			}
			return chainview.WriteListing(c.stdout, st.URL, l, time.Now())
		},
	}
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysVerify, readHere)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the listing as one JSON document")
	return cmd
}

func (c *cli) inspectCmd() *cobra.Command {
	var store storeFlags
	var target, link, table string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Print one link's transactions and changes (reads the store directly; no worker needed)",
		Long: `Prints the transactions and changes of an incremental, one line each: a
transaction's BEGIN and COMMIT with its commit time and identity (xid and commit
LSN for a PostgreSQL source, GTID for the MySQL family), and between them each
change with its table, its key columns' values and the columns it sets. For a
full, prints each table's row and chunk counts (not the rows). The link is read
chunk by chunk, never whole.

--link takes a link ID as ` + "`sluice backup list`" + ` prints it (a unique prefix of at
least 6 characters) or whole. --table keeps one qualified table ("public.t"):
its changes and the transactions that hold them, or its line of a full.
--json prints JSON lines instead (field names in docs/operations.md).
Exit 0: printed; exit 3: no such link (SLUICE-E-LINK-NOT-FOUND), no chain, or
damage; exit 2: an encrypted chain without its key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--target", target)
			if err != nil {
				return err
			}
			if link == "" {
				return usageError("--link is required: a link ID as `sluice backup list` prints it")
			}
			ctx := cmd.Context()
			ch, err := openChainHere(ctx, st)
			if err != nil {
				return err
			}
			w := bufio.NewWriter(c.stdout)
			enc := json.NewEncoder(w)
			v := chainview.Visitor{
				Link: func(li chainview.LinkInfo) error {
					if !asJSON {
						fmt.Fprintln(w, chainview.LinkLine(li))
					}
					return nil
				},
				Table: func(tv chainview.TableView) error {
					if asJSON {
						return enc.Encode(tv)
					}
					_, err := fmt.Fprintln(w, chainview.TableLine(tv))
					return err
				},
				Record: func(r *chainview.Record) error {
					if asJSON {
						return enc.Encode(r)
					}
					_, err := fmt.Fprintln(w, chainview.RecordLine(r))
					return err
				},
			}
			err = chainview.Inspect(ctx, ch, link, table, v)
			if ferr := w.Flush(); err == nil && ferr != nil {
				err = fmt.Errorf("write the output: %w", ferr)
			}
			return err
		},
	}
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysVerify, readHere)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().StringVar(&link, "link", "", "the link to print: its ID, or a unique prefix of at least 6 characters")
	cmd.Flags().StringVar(&table, "table", "", `print only this qualified table ("schema.name")`)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines: one object per record (or per table of a full)")
	return cmd
}
