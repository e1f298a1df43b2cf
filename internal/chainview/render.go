package chainview

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/filter"
)

// ShortID is how the text output shows a link ID: its first 12
// characters, a prefix Inspect accepts.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// WriteListing renders a listing as an operator's table: a heading, one
// line per link, and one line per broker. now is the time broker reports'
// ages are measured from.
func WriteListing(w io.Writer, chainURL string, l *Listing, now time.Time) error {
	links := 0
	for _, s := range l.Segments {
		links += len(s.Links)
	}
	src := l.Source.Engine + " " + l.Source.Database
	if l.Source.Slot != "" {
		src += " (slot " + l.Source.Slot + ")"
	}
	enc := ""
	switch {
	case l.KeyNeeded:
		enc = ", encrypted (no key given)"
	case l.Sealed:
		enc = ", encrypted"
	}
	fmt.Fprintf(w, "chain %s  id %s  generation %d  source %s%s\n", chainURL, ShortID(l.ChainID), l.Generation, src, enc)
	fmt.Fprintf(w, "%d segments, %d links\n\n", len(l.Segments), links)

	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEG\tLINK\tKIND\tSTART\tEND\tCREATED\tFIRST COMMIT\tLAST COMMIT\tTXNS\tCHANGES\tROWS\tSIZE\tBROKERS")
	for _, s := range l.Segments {
		seg := strconv.Itoa(s.Index)
		if !s.Capped {
			seg += "*"
		}
		for _, lv := range s.Links {
			kind, txns, changes, rows := "incr", strconv.FormatInt(lv.Transactions, 10), strconv.FormatInt(lv.Changes, 10), "-"
			if lv.Kind == "full" {
				kind, txns, changes, rows = "full", "-", "-", strconv.FormatInt(lv.Rows, 10)
			}
			first, last := "-", "-"
			if l.KeyNeeded && lv.Kind != "full" {
				first, last = "(key)", "(key)"
			}
			if lv.FirstCommit != nil {
				first = stamp(*lv.FirstCommit)
			}
			if lv.LastCommit != nil {
				last = stamp(*lv.LastCommit)
			}
			brokers := strings.Join(lv.Brokers, ",")
			if brokers != "" {
				brokers = "<- " + brokers
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", seg, ShortID(lv.ID), kind,
				lv.StartPosition, lv.EndPosition, stamp(lv.CreatedAt), first, last, txns, changes, rows, HumanBytes(lv.StoredBytes), brokers)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the listing: %w", err)
	}
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
	fmt.Fprintln(w, "(* the open segment; times UTC; SIZE is the stored size of the link's chunks)")
	if l.KeyNeeded {
		fmt.Fprintln(w, "the chain is encrypted: first and last commit times and the segments' filters need its key (--key-passphrase-env, --key-passphrase-file, --key-identity-file or --kms-key)")
	}
	writeFilters(w, l)
	if len(l.Brokers) == 0 {
		_, err := fmt.Fprintln(w, "\nno broker has reported a position into this store")
		return err
	}
	fmt.Fprintln(w, "\nbrokers:")
	for _, b := range l.Brokers {
		ago := now.Sub(b.UpdatedAt).Round(time.Second)
		switch b.State {
		case BrokerAt:
			behind := "at the tip"
			if b.Behind > 0 {
				behind = fmt.Sprintf("%d link(s) behind the tip", b.Behind)
			}
			fmt.Fprintf(w, "  %s: applied through %s (segment %d), %s; reported %s ago\n", b.Stream, ShortID(b.LastApplied), b.Segment, behind, ago)
		case BrokerOtherChain:
			fmt.Fprintf(w, "  %s: reports link %s of another chain; reported %s ago\n", b.Stream, ShortID(b.LastApplied), ago)
		case BrokerLinkGone:
			fmt.Fprintf(w, "  %s: applied through %s, which the chain no longer holds (pruned past it); reported %s ago\n", b.Stream, ShortID(b.LastApplied), ago)
		default:
			fmt.Fprintf(w, "  %s: its report does not parse; written %s ago\n", b.Stream, ago)
		}
	}
	return nil
}

// stamp renders a time for the table: UTC to the second.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// HumanBytes renders a size in binary units ("1.5 MiB").
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// maxShown is how many bytes of a value a text line shows.
const maxShown = 60

// RecordLine renders one record as a line of text: a transaction's begin
// and commit flush left, its changes indented under them.
func RecordLine(r *Record) string {
	var b strings.Builder
	switch r.Op {
	case "begin", "commit":
		b.WriteString(strings.ToUpper(r.Op))
		if r.CommitTime != nil {
			b.WriteString(" " + r.CommitTime.UTC().Format("2006-01-02T15:04:05.000000Z"))
		}
		b.WriteString(" " + txText(r))
		return b.String()
	}
	b.WriteString("  " + r.Op)
	if r.Table != "" {
		b.WriteString(" " + r.Table)
	}
	if len(r.Tables) > 0 {
		b.WriteString(" " + strings.Join(r.Tables, ", "))
	}
	if len(r.Key) > 0 {
		b.WriteString(" key(")
		for i, k := range r.Key {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k.Column + "=" + shown(k.Value))
		}
		b.WriteString(")")
	}
	for _, c := range r.Changed {
		b.WriteString(" " + c.Column + "=")
		switch {
		case c.Old != nil:
			b.WriteString(shown(c.Old) + "->")
		case c.OldNull:
			b.WriteString("NULL->")
		}
		b.WriteString(shown(c.Value))
	}
	if len(r.Columns) > 0 {
		b.WriteString(" columns(" + strings.Join(r.Columns, ", ") + ")")
	}
	return b.String()
}

// txText names a record's transaction.
func txText(r *Record) string {
	switch {
	case r.GTID != "":
		return "gtid " + r.GTID
	case r.XID != 0 || r.CommitLSN != "":
		return fmt.Sprintf("xid %d commit-lsn %s", r.XID, r.CommitLSN)
	}
	return "(no identity)"
}

// shown renders a value for a text line: NULL, a bare word, or a quoted
// string, cut after maxShown bytes.
func shown(v *string) string {
	if v == nil {
		return "NULL"
	}
	s := *v
	cut := ""
	if len(s) > maxShown {
		n := maxShown
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		cut = fmt.Sprintf("…(%d bytes)", len(s))
		s = s[:n]
	}
	bare := s != "" && s != "NULL"
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '=' || r == ',' || r == '(' || r == ')' || r == '\\' || !strconv.IsPrint(r) {
			bare = false
			break
		}
	}
	if !bare {
		s = strconv.Quote(s)
	}
	return s + cut
}

// TableLine renders one table of a full.
func TableLine(t TableView) string {
	return fmt.Sprintf("  %s  rows %d  chunks %d  stored %s", t.Table, t.Rows, t.Chunks, HumanBytes(t.StoredBytes))
}

// LinkLine renders the heading of an inspected link.
func LinkLine(li LinkInfo) string {
	l := li.Link
	return fmt.Sprintf("%s %s (segment %d): %s to %s, created %s", l.Kind, l.ID, li.Segment, l.StartPosition, l.EndPosition, stamp(l.CreatedAt))
}

// writeFilters lists each segment's filters, when any segment has some:
// what its producer left out or masked.
func writeFilters(w io.Writer, l *Listing) {
	filtered := false
	for _, s := range l.Segments {
		filtered = filtered || !s.Filters.Empty()
	}
	if !filtered {
		return
	}
	fmt.Fprintln(w, "\nfilters (what each segment's producer left out or masked):")
	for _, s := range l.Segments {
		d := filter.Describe(s.Filters)
		if d == "" {
			d = "none: every table and column, unmasked"
		}
		fmt.Fprintf(w, "  segment %d: %s\n", s.Index, d)
	}
}
