package chain

// SequencesThrough returns the sequence counters the incrementals ms record,
// in chain order, merged: for each counter, the value of the last one that
// records it (the source's latest state as of the last of ms). Nil when
// none records any.
func SequencesThrough(ms []*Manifest) map[string]int64 {
	var out map[string]int64
	for _, m := range ms {
		if m == nil {
			continue
		}
		for name, v := range m.Sequences {
			if out == nil {
				out = map[string]int64{}
			}
			out[name] = v
		}
	}
	return out
}

// SequencesMoved returns the counters of now whose value differs from the
// one recorded in last (or that last lacks): what a link records after
// last. Nil when none moved.
func SequencesMoved(last, now map[string]int64) map[string]int64 {
	var out map[string]int64
	for name, v := range now {
		if old, ok := last[name]; ok && old == v {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[name] = v
	}
	return out
}
