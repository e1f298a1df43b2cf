package apply

import (
	"reflect"

	"github.com/sluicehq/sluice/internal/chain"
)

// SeamChanges returns the schema changes that bring a target from schema
// from (where the previous segment left it) to schema to (the one in force
// before the first incremental of the next segment): one per table of to
// that from lacks or defines otherwise, in to's order with partitions after
// every other table, so a partition's parent exists first. Tables only from
// has are left alone, as a table dropped on the source is within a segment.
func SeamChanges(from, to *chain.Schema) []*chain.Change {
	if from == nil || to == nil {
		return nil
	}
	had := make(map[string]*chain.Table, len(from.Tables))
	for i := range from.Tables {
		had[from.Tables[i].QualifiedName()] = &from.Tables[i]
	}
	var plain, partitions []*chain.Change
	for i := range to.Tables {
		t := to.Tables[i]
		name := t.QualifiedName()
		if old := had[name]; old != nil && reflect.DeepEqual(*old, t) {
			continue
		}
		c := &chain.Change{Op: chain.OpSchema, Table: name, Schema: &t}
		if t.PartitionOf != "" {
			partitions = append(partitions, c)
		} else {
			plain = append(plain, c)
		}
	}
	return append(plain, partitions...)
}
