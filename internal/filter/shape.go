package filter

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// FixedEncoder turns a fixed:VALUE mask's value into the column's forms:
// its canonical text output (what change records carry) and, for a column
// whose chunks hold another encoding (chain.EncodingBinary), the value in
// that encoding. A value the column's type does not accept is an error. A
// source engine supplies it (PostgreSQL asks the server to cast the value);
// nil accepts the text as given, for text-encoded columns only.
type FixedEncoder func(col chain.Column, text string) (canonical string, encoded []byte, err error)

// Shape is how one table crosses: the table as the chain records it (its
// excluded columns left out) and, for each recorded column, where its
// value comes from in the source's row and how it is masked.
type Shape struct {
	// Table is the recorded table.
	Table *chain.Table
	// Keep[i] is the index, in the columns of the table Shape was given,
	// of recorded column i.
	Keep []int
	// masks[i] masks recorded column i; nil where the column is not masked.
	masks []*columnMask
	// dropped is true when a column was left out.
	dropped bool
	key     []byte
}

type columnMask struct {
	st Strategy
	// binary is true when the column's chunks hold a non-text encoding;
	// then fixedEncoded is fixed's value in it.
	binary       bool
	fixedText    []byte
	fixedEncoded []byte
}

// Trivial reports whether the shape changes nothing (nil counts).
func (s *Shape) Trivial() bool { return s == nil || (!s.dropped && !s.HasMasks()) }

// HasMasks reports whether any recorded column is masked.
func (s *Shape) HasMasks() bool {
	if s == nil {
		return false
	}
	for _, m := range s.masks {
		if m != nil {
			return true
		}
	}
	return false
}

// Masked reports whether recorded column i is masked.
func (s *Shape) Masked(i int) bool { return s != nil && s.masks[i] != nil }

// Project turns a row image over the given table's columns into one over
// the recorded columns, masking as it goes; it reuses dst. Values of kind
// chain.ValueText are masked; NULL stays NULL (except under fixed), and an
// unchanged (TOASTed) value stays unchanged. A trivial shape returns src.
func (s *Shape) Project(dst, src []chain.Value) []chain.Value {
	if s.Trivial() || src == nil {
		return src
	}
	dst = dst[:0]
	for i, from := range s.Keep {
		v := chain.Value{Kind: chain.ValueNull}
		if from < len(src) {
			v = src[from]
		}
		if m := s.masks[i]; m != nil {
			v = m.maskValue(v, s.key)
		}
		dst = append(dst, v)
	}
	return dst
}

func (m *columnMask) maskValue(v chain.Value, key []byte) chain.Value {
	switch {
	case v.Kind == chain.ValueUnchanged:
		return v
	case m.st.Name == StrategyNull:
		return chain.Value{Kind: chain.ValueNull}
	case m.st.Name == StrategyFixed:
		return chain.Value{Kind: chain.ValueText, Data: m.fixedText}
	case v.Kind == chain.ValueNull:
		return v
	}
	return chain.Value{Kind: chain.ValueText, Data: m.st.applyText(nil, key, v.Data)}
}

// Cell masks one value of recorded column i as a full's chunk encodes it
// (the column's chain encoding); isNull says the input is NULL. It returns
// the value to encode and whether that is NULL. An unmasked column's value
// comes back as is.
func (s *Shape) Cell(i int, v []byte, isNull bool) (out []byte, outNull bool) {
	if s == nil || s.masks[i] == nil {
		return v, isNull
	}
	m := s.masks[i]
	switch m.st.Name {
	case StrategyNull:
		return nil, true
	case StrategyFixed:
		if m.binary {
			return m.fixedEncoded, false
		}
		return m.fixedText, false
	}
	if isNull {
		return nil, true
	}
	// Text kinds hold their UTF-8 text in every encoding.
	return m.st.applyText(nil, s.key, v), false
}

// Shape returns how table t, which Includes, crosses: it leaves out the
// excluded columns and sets up the masks, refusing a key column excluded
// (SLUICE-E-FILTER-KEY-COLUMN) and a mask that cannot produce a value of
// the column or would break one of its constraints
// (SLUICE-E-MASK-UNSUPPORTED). enc encodes fixed values (see FixedEncoder).
// A column the filter names that t lacks is passed over: a capture sees
// tables whose columns were dropped on the source since the full (which
// refused unknown columns through ShapeSchema). A nil filter returns a
// trivial shape of t itself.
func (f *Filter) Shape(t *chain.Table, enc FixedEncoder) (*Shape, error) {
	return f.shape(t, nil, enc, false)
}

// ShapeSchema shapes every included table of s: it returns the schema the
// chain records (excluded tables and columns left out) and each recorded
// table's shape by qualified name. It also refuses a mask on a column that
// another table's foreign key references, and a named table or column the
// schema lacks.
func (f *Filter) ShapeSchema(s *chain.Schema, enc FixedEncoder) (*chain.Schema, map[string]*Shape, error) {
	shapes := map[string]*Shape{}
	if f == nil {
		for i := range s.Tables {
			t := &s.Tables[i]
			shapes[t.QualifiedName()], _ = (*Filter)(nil).Shape(t, enc)
		}
		return s, shapes, nil
	}
	for i := range s.Tables {
		f.LearnPartition(s.Tables[i].QualifiedName(), s.Tables[i].PartitionOf)
	}
	out := *s
	out.Tables = nil
	for i := range s.Tables {
		t := &s.Tables[i]
		if !f.Includes(t.Schema, t.Name) {
			continue
		}
		sh, err := f.shape(t, s, enc, true)
		if err != nil {
			return nil, nil, err
		}
		shapes[t.QualifiedName()] = sh
		out.Tables = append(out.Tables, *sh.Table)
	}
	for _, named := range []map[string]map[string]bool{f.excluded, maskColumns(f.masks)} {
		for q := range named {
			found := false
			for i := range s.Tables {
				if s.Tables[i].QualifiedName() == q {
					found = true
				}
			}
			if !found {
				return nil, nil, errcode.New(errcode.FilterInvalid, "table %s, named by --exclude-column or --mask, is not in the source", q)
			}
			if _, ok := shapes[q]; !ok {
				return nil, nil, errcode.New(errcode.FilterInvalid, "table %s, named by --exclude-column or --mask, is left out by the table filters", q)
			}
		}
	}
	// Foreign keys to tables left out, and sequences owned by a table or
	// column left out, go too: the target could not create them.
	shaped, _ := KeepTables(&out, func(q string) bool {
		schema, name, _ := strings.Cut(q, ".")
		return f.Includes(schema, name)
	})
	shaped.Sequences = f.withoutExcludedOwners(shaped.Sequences)
	for i := range shaped.Tables {
		shapes[shaped.Tables[i].QualifiedName()].Table = &shaped.Tables[i]
	}
	return shaped, shapes, nil
}

// withoutExcludedOwners leaves out the sequences whose owning column is
// excluded: the column, and the default that used the sequence, do not
// cross.
func (f *Filter) withoutExcludedOwners(seqs []chain.Sequence) []chain.Sequence {
	var out []chain.Sequence
	for _, q := range seqs {
		if q.OwnedByColumn != "" && f.excluded[f.root(q.Schema+"."+q.OwnedByTable)][q.OwnedByColumn] {
			continue
		}
		out = append(out, q)
	}
	return out
}

func maskColumns(m map[string]map[string]Strategy) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for q, cols := range m {
		out[q] = map[string]bool{}
		for c := range cols {
			out[q][c] = true
		}
	}
	return out
}

func (f *Filter) shape(t *chain.Table, s *chain.Schema, enc FixedEncoder, strict bool) (*Shape, error) {
	sh := &Shape{Table: t}
	if f == nil {
		sh.Keep = make([]int, len(t.Columns))
		for i := range sh.Keep {
			sh.Keep[i] = i
		}
		sh.masks = make([]*columnMask, len(t.Columns))
		return sh, nil
	}
	f.LearnPartition(t.QualifiedName(), t.PartitionOf)
	// A partition is cut and masked as the root of its tree.
	q := f.root(t.QualifiedName())
	excluded, masks := f.excluded[q], f.masks[q]
	has := map[string]bool{}
	for _, c := range t.Columns {
		has[c.Name] = true
	}
	for c := range excluded {
		if strict && !has[c] {
			return nil, errcode.New(errcode.FilterInvalid, "--exclude-column %s.%s: table %s has no such column", q, c, q)
		}
	}
	for c := range masks {
		if strict && !has[c] {
			return nil, errcode.New(errcode.FilterInvalid, "--mask %s.%s: table %s has no such column", q, c, q)
		}
	}
	keyCols := keyColumns(t)
	for c := range excluded {
		if why, ok := keyCols[c]; ok {
			return nil, errcode.New(errcode.FilterKeyColumn, "--exclude-column %s.%s: the column is part of %s, which the target needs to apply updates and deletes", q, c, why)
		}
	}
	out := *t
	out.Columns = nil
	for i, c := range t.Columns {
		if excluded[c.Name] {
			sh.dropped = true
			continue
		}
		sh.Keep = append(sh.Keep, i)
		out.Columns = append(out.Columns, c)
		var cm *columnMask
		if st, ok := masks[c.Name]; ok {
			var err error
			if cm, err = checkMask(t, c, st, keyCols, s, enc); err != nil {
				return nil, err
			}
		}
		sh.masks = append(sh.masks, cm)
	}
	if sh.dropped {
		out.Indexes = nil
		for _, ix := range t.Indexes {
			if !indexUses(ix, excluded) {
				out.Indexes = append(out.Indexes, ix)
			}
		}
		out.Constraints = nil
		for _, con := range t.Constraints {
			if !mentionsAny(con.Definition, excluded) {
				out.Constraints = append(out.Constraints, con)
			}
		}
	}
	sh.Table = &out
	sh.key = f.key
	return sh, nil
}

// keyColumns names the columns of t's primary key and unique indexes, each
// with what it belongs to.
func keyColumns(t *chain.Table) map[string]string {
	out := map[string]string{}
	for _, ix := range t.Indexes {
		if ix.Unique {
			for _, c := range ix.Columns {
				out[c] = "unique index " + ix.Name
			}
		}
	}
	for _, c := range t.PrimaryKey {
		out[c] = "the primary key"
	}
	return out
}

// indexUses reports whether an index is on an excluded column. An
// expression index names no columns, so its definition is searched.
func indexUses(ix chain.Index, excluded map[string]bool) bool {
	for _, c := range ix.Columns {
		if excluded[c] {
			return true
		}
	}
	return ix.Expression && mentionsAny(ix.Definition, excluded)
}

var lengthRE = regexp.MustCompile(`\((\d+)\)\s*(\[\])?\s*$`)

// textLength returns the declared length of a text column's type
// ("character varying(20)", "varchar(20)", "char(8)"), or 0 when none.
func textLength(c chain.Column) int {
	if m := lengthRE.FindStringSubmatch(c.Type); m != nil && m[2] == "" {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// checkMask refuses a strategy column c cannot take.
func checkMask(t *chain.Table, c chain.Column, st Strategy, keyCols map[string]string, s *chain.Schema, enc FixedEncoder) (*columnMask, error) {
	where := t.QualifiedName() + "." + c.Name
	refuse := func(format string, args ...any) error {
		return errcode.New(errcode.MaskUnsupported, "--mask %s=%s: "+format, append([]any{where, st}, args...)...)
	}
	kind := c.NeutralKind()
	if c.Generated != "" {
		return nil, refuse("the column is generated; the target computes it")
	}
	if st.textOnly() && kind.Name != value.Text {
		return nil, refuse("strategy %s works on text columns, and the column is %s (%s)", st.Name, c.Type, kind)
	}
	if why, ok := keyCols[c.Name]; ok && !st.keepsUnique() {
		return nil, refuse("the column is part of %s, and %s can make two rows equal; use hash or email, which keep distinct values distinct", why, st.Name)
	}
	if st.Name == StrategyNull && c.NotNull {
		return nil, refuse("the column is NOT NULL")
	}
	for _, con := range t.Constraints {
		if mentionsAny(con.Definition, map[string]bool{c.Name: true}) {
			return nil, refuse("constraint %s (%s) uses the column, and masked values may break it; drop the constraint on the source or exclude the column", con.Name, con.Definition)
		}
	}
	if s != nil {
		for i := range s.Tables {
			other := &s.Tables[i]
			for _, con := range other.Constraints {
				if con.Type == "f" && referencesColumn(con.Definition, t, c.Name) {
					return nil, refuse("foreign key %s of table %s references the column; masked values would break it", con.Name, other.QualifiedName())
				}
			}
		}
	}
	limit := textLength(c)
	if limit > 0 && st.Name == StrategyHash && limit < hashLen {
		return nil, refuse("a hash is %d characters, and the column holds at most %d", hashLen, limit)
	}
	if limit > 0 && st.Name == StrategyEmail && limit < hashLen {
		return nil, refuse("an e-mail mask is 16 characters plus the domain, and the column holds at most %d (at least %d are needed)", limit, hashLen)
	}
	cm := &columnMask{st: st, binary: c.Encoding == chain.EncodingBinary && kind.Name != value.Text}
	if st.Name == StrategyFixed {
		if limit > 0 && len([]rune(st.Value)) > limit {
			return nil, refuse("the value is longer than the column's %d characters", limit)
		}
		text, encoded := st.Value, []byte(nil)
		switch {
		case enc != nil:
			var err error
			if text, encoded, err = enc(c, st.Value); err != nil {
				return nil, refuse("the column's type %s does not take the value: %v", c.Type, err)
			}
		case cm.binary:
			return nil, refuse("fixed values of %s columns are not supported by this source", kind)
		}
		cm.fixedText, cm.fixedEncoded = []byte(text), encoded
	}
	return cm, nil
}

// mentionsAny reports whether a recorded definition names any of the
// columns as an identifier (bare or double- or back-quoted). It errs on the
// side of yes: a string literal equal to a column's name counts.
func mentionsAny(def string, cols map[string]bool) bool {
	for _, tok := range identifiers(def) {
		if cols[tok] {
			return true
		}
	}
	return false
}

// identifiers splits SQL text into its identifier-like tokens, unquoting
// "…" and `…`.
func identifiers(def string) []string {
	var out []string
	for i := 0; i < len(def); {
		ch := def[i]
		switch {
		case ch == '"' || ch == '`':
			j := strings.IndexByte(def[i+1:], ch)
			if j < 0 {
				return append(out, def[i+1:])
			}
			out = append(out, def[i+1:i+1+j])
			i += j + 2
		case isIdentByte(ch):
			j := i
			for j < len(def) && isIdentByte(def[j]) {
				j++
			}
			out = append(out, def[i:j])
			i = j
		default:
			i++
		}
	}
	return out
}

func isIdentByte(b byte) bool {
	return b == '_' || b == '$' || b >= 0x80 || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

// referencesColumn reports whether a foreign key definition
// ("FOREIGN KEY (a) REFERENCES s.t(b)") references column col of t.
func referencesColumn(def string, t *chain.Table, col string) bool {
	i := strings.Index(strings.ToUpper(def), "REFERENCES")
	if i < 0 {
		return false
	}
	toks := identifiers(def[i+len("REFERENCES"):])
	// The referenced table is the first one or two tokens (schema, name).
	named := false
	rest := toks
	switch {
	case len(toks) >= 2 && toks[0] == t.Schema && toks[1] == t.Name:
		named, rest = true, toks[2:]
	case len(toks) >= 1 && toks[0] == t.Name:
		named, rest = true, toks[1:]
	}
	if !named {
		return false
	}
	for _, tok := range rest {
		if strings.EqualFold(tok, "MATCH") || strings.EqualFold(tok, "ON") {
			break
		}
		if tok == col {
			return true
		}
	}
	return false
}
