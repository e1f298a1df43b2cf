package sqlkit

import (
	"context"
	"database/sql"
)

// Stmts caches a table's prepared statements by the shape of the change
// they serve (operation, key, the columns set or matched), as a key the
// applier builds with AppendMask.
type Stmts map[string]*sql.Stmt

// Get returns the statement cached under key, preparing the SQL build
// returns on q on first use.
func (s Stmts) Get(ctx context.Context, q Execer, key []byte, build func() string, classify Classify) (*sql.Stmt, error) {
	if st, ok := s[string(key)]; ok {
		return st, nil
	}
	text := build()
	st, err := q.PrepareContext(ctx, text)
	if err != nil {
		return nil, classify(err, "prepare "+text)
	}
	s[string(key)] = st
	return st, nil
}

// Close closes and forgets every statement.
func (s Stmts) Close() {
	for k, st := range s {
		st.Close()
		delete(s, k)
	}
}

// AppendMask appends a bitmap of flags to key and counts the set ones.
func AppendMask(key []byte, flags []bool) ([]byte, int) {
	n := 0
	for i := 0; i < len(flags); i += 8 {
		var b byte
		for j := i; j < len(flags) && j < i+8; j++ {
			if flags[j] {
				b |= 1 << (j - i)
				n++
			}
		}
		key = append(key, b)
	}
	return key, n
}

// GrowFlags returns (*buf)[:n], growing the buffer when it is too small.
func GrowFlags(buf *[]bool, n int) []bool {
	if cap(*buf) < n {
		*buf = make([]bool, n)
	}
	return (*buf)[:n]
}

// Arbiter turns the judged arbiter's column names into indexes of names,
// compared by fold; ok is false when one is not there.
func Arbiter(names []string, arbiter []string, fold func(string) string) (idx []int, ok bool) {
	if len(arbiter) == 0 {
		return nil, false
	}
	idx = make([]int, 0, len(arbiter))
	for _, want := range arbiter {
		found := -1
		for i, n := range names {
			if fold(n) == fold(want) {
				found = i
				break
			}
		}
		if found < 0 {
			return nil, false
		}
		idx = append(idx, found)
	}
	return idx, true
}
