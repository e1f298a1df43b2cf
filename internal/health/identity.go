package health

import "time"

// identityState is what a producer's capture last found about the tables its
// publication publishes without a usable replica identity.
type identityState struct {
	// tables is the latest check's list, replaced whole (never changed in
	// place), so a Status may share it.
	tables []string
	// warned holds every table already reported in this run.
	warned map[string]bool
}

// ReplicaIdentityGaps records the tables producer run k's publication
// publishes without a usable replica identity, as its capture last found
// them (none: an empty list), and returns those not reported before in this
// run, so the caller warns once per table per run. A nil Tracker remembers
// nothing and returns every table.
func (t *Tracker) ReplicaIdentityGaps(k Key, tables []string) (fresh []string) {
	if t == nil {
		return tables
	}
	t.update(k, func(r *run, _ time.Time) {
		r.identity.tables = append([]string{}, tables...)
		if r.identity.warned == nil {
			r.identity.warned = map[string]bool{}
		}
		for _, tb := range tables {
			if !r.identity.warned[tb] {
				r.identity.warned[tb] = true
				fresh = append(fresh, tb)
			}
		}
	})
	return fresh
}
