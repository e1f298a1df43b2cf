package value

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxArrayDims is PostgreSQL's limit on array dimensions (MAXDIM).
const maxArrayDims = 6

// arrayElemKind returns an array kind's element kind, refusing an array
// kind without one or with an array element (PostgreSQL arrays do not
// nest; extra dimensions are Dims).
func arrayElemKind(k Kind) (Kind, error) {
	if k.Elem == nil {
		return Kind{}, errors.New("array kind has no element kind")
	}
	if k.Elem.Name == Array {
		return Kind{}, errors.New("array kind has an array element kind")
	}
	return *k.Elem, nil
}

// decodeArrayText reads PostgreSQL's array text: "{1,2,NULL}",
// "{{1,2},{3,4}}", quoted elements with backslash escapes, an optional
// bounds decoration ("[0:1]={7,8}", whose lower bounds are not kept).
func decodeArrayText(k Kind, text []byte) (Value, error) {
	elem, err := arrayElemKind(k)
	if err != nil {
		return Value{}, textError(k, text, "%s", err)
	}
	p := &arrayParser{scanner: scanner{s: string(text)}, elem: elem, leaf: -1}
	v, err := p.parse()
	if err != nil {
		return Value{}, fmt.Errorf("value: %s text %s: %w", k, textExcerpt(text), err)
	}
	return v, nil
}

// arrayParser reads one array's text.
type arrayParser struct {
	scanner
	elem Kind
	// dims[d] is the length every list at depth d has (once set[d]).
	dims [maxArrayDims]int
	set  [maxArrayDims]bool
	// leaf is the depth elements sit at, -1 before the first; hasSub[d]
	// records a sub-list inside a list at depth d.
	leaf   int
	hasSub [maxArrayDims]bool
	elems  []Value
}

// isArraySpace is the whitespace PostgreSQL's array reader skips.
func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func (p *arrayParser) skipSpace() {
	for p.i < len(p.s) && isArraySpace(p.s[p.i]) {
		p.i++
	}
}

func (p *arrayParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *arrayParser) parse() (Value, error) {
	p.skipSpace()
	var declared []int
	if p.i < len(p.s) && p.s[p.i] == '[' {
		for p.accept('[') {
			lower := 1
			upper, ok := p.bound()
			if ok && p.accept(':') {
				lower = upper
				upper, ok = p.bound()
			}
			if !ok {
				return Value{}, p.errorf("bad array bounds")
			}
			if !p.accept(']') || upper < lower-1 || upper-lower >= 1<<30 || len(declared) == maxArrayDims {
				return Value{}, p.errorf("bad array bounds")
			}
			declared = append(declared, upper-lower+1)
		}
		p.skipSpace()
		if !p.accept('=') {
			return Value{}, p.errorf("array bounds without \"=\"")
		}
		p.skipSpace()
	}
	if !p.accept('{') {
		return Value{}, p.errorf("an array starts with \"{\"")
	}
	if err := p.list(0); err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if !p.done() {
		return Value{}, p.errorf("text after the array")
	}
	if len(p.elems) == 0 {
		for _, d := range declared {
			if d != 0 {
				return Value{}, errors.New("array bounds do not match the elements")
			}
		}
		return Value{}, nil
	}
	dims := append([]int(nil), p.dims[:p.leaf+1]...)
	if declared != nil {
		if len(declared) != len(dims) {
			return Value{}, errors.New("array bounds do not match the elements")
		}
		for i := range dims {
			if declared[i] != dims[i] {
				return Value{}, errors.New("array bounds do not match the elements")
			}
		}
	}
	return Value{Elems: p.elems, Dims: dims}, nil
}

// bound reads one number of a bounds decoration.
func (p *arrayParser) bound() (int, bool) {
	n, ok := p.signedNumber()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 32)
	return int(v), err == nil
}

// list reads a list whose "{" is consumed, at depth (0 outermost).
func (p *arrayParser) list(depth int) error {
	if depth >= maxArrayDims {
		return p.errorf("more than %d dimensions", maxArrayDims)
	}
	p.skipSpace()
	n := 0
	if !p.accept('}') {
		for {
			p.skipSpace()
			if p.accept('{') {
				if p.leaf >= 0 && p.leaf <= depth {
					return p.errorf("a sub-array beside elements")
				}
				p.hasSub[depth] = true
				if err := p.list(depth + 1); err != nil {
					return err
				}
			} else {
				if p.hasSub[depth] || p.leaf >= 0 && p.leaf != depth {
					return p.errorf("an element beside sub-arrays")
				}
				p.leaf = depth
				if err := p.element(); err != nil {
					return err
				}
			}
			n++
			p.skipSpace()
			if p.accept(',') {
				continue
			}
			if p.accept('}') {
				break
			}
			return p.errorf("expected \",\" or \"}\"")
		}
	}
	if p.set[depth] && p.dims[depth] != n {
		return p.errorf("sub-arrays of different lengths")
	}
	p.set[depth], p.dims[depth] = true, n
	return nil
}

// element reads one element, quoted or not, and decodes it by the element
// kind; an unquoted, unescaped NULL (any case) is a NULL element.
func (p *arrayParser) element() error {
	var b []byte
	quoted, escaped := false, false
	if p.accept('"') {
		quoted = true
		for {
			if p.done() {
				return p.errorf("unterminated quoted element")
			}
			c := p.s[p.i]
			p.i++
			if c == '"' {
				break
			}
			if c == '\\' {
				if p.done() {
					return p.errorf("unterminated quoted element")
				}
				c = p.s[p.i]
				p.i++
			}
			b = append(b, c)
		}
	} else {
		keep := 0 // b's length without trailing unescaped whitespace
		for !p.done() {
			c := p.s[p.i]
			if c == ',' || c == '}' {
				break
			}
			if c == '{' || c == '"' {
				return p.errorf("unexpected %q in an unquoted element", c)
			}
			p.i++
			if c == '\\' {
				if p.done() {
					return p.errorf("backslash at the end")
				}
				b = append(b, p.s[p.i])
				p.i++
				escaped, keep = true, len(b)
				continue
			}
			b = append(b, c)
			if !isArraySpace(c) {
				keep = len(b)
			}
		}
		b = b[:keep]
		if len(b) == 0 {
			return p.errorf("empty unquoted element")
		}
	}
	if !quoted && !escaped && strings.EqualFold(string(b), "NULL") {
		p.elems = append(p.elems, Value{Null: true})
		return nil
	}
	v, err := DecodePGText(p.elem, b)
	if err != nil {
		return fmt.Errorf("element %d: %w", len(p.elems)+1, err)
	}
	p.elems = append(p.elems, v)
	return nil
}

// checkArrayShape checks that v's Dims hold exactly its Elems.
func checkArrayShape(v Value) error {
	if len(v.Dims) == 0 {
		if len(v.Elems) != 0 {
			return fmt.Errorf("%d elements and no dimensions", len(v.Elems))
		}
		return nil
	}
	if len(v.Dims) > maxArrayDims {
		return fmt.Errorf("%d dimensions; PostgreSQL allows %d", len(v.Dims), maxArrayDims)
	}
	total := 1
	for _, d := range v.Dims {
		if d <= 0 {
			return fmt.Errorf("dimension of length %d", d)
		}
		if total > len(v.Elems)/d {
			return fmt.Errorf("dimensions %v do not hold %d elements", v.Dims, len(v.Elems))
		}
		total *= d
	}
	if total != len(v.Elems) {
		return fmt.Errorf("dimensions %v do not hold %d elements", v.Dims, len(v.Elems))
	}
	return nil
}

func encodeArrayText(k Kind, v Value) ([]byte, error) {
	elem, err := arrayElemKind(k)
	if err != nil {
		return nil, valueError(k, "%s", err)
	}
	if err := checkArrayShape(v); err != nil {
		return nil, valueError(k, "%s", err)
	}
	if len(v.Dims) == 0 {
		return []byte("{}"), nil
	}
	var b []byte
	next := 0
	var write func(depth int) error
	write = func(depth int) error {
		b = append(b, '{')
		for i := 0; i < v.Dims[depth]; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if depth+1 < len(v.Dims) {
				if err := write(depth + 1); err != nil {
					return err
				}
				continue
			}
			e := v.Elems[next]
			next++
			if e.Null {
				b = append(b, "NULL"...)
				continue
			}
			t, err := EncodePGText(elem, e)
			if err != nil {
				return fmt.Errorf("element %d: %w", next, err)
			}
			b = appendArrayElem(b, t)
		}
		b = append(b, '}')
		return nil
	}
	if err := write(0); err != nil {
		return nil, fmt.Errorf("value: encode %s: %w", k, err)
	}
	return b, nil
}

// appendArrayElem appends an element's text, quoted when PostgreSQL would
// quote it: empty, spelling NULL, or holding a quote, a backslash, a brace,
// the delimiter or whitespace.
func appendArrayElem(b, t []byte) []byte {
	quote := len(t) == 0 || strings.EqualFold(string(t), "NULL")
	for _, c := range t {
		if c == '"' || c == '\\' || c == '{' || c == '}' || c == ',' || isArraySpace(c) {
			quote = true
			break
		}
	}
	if !quote {
		return append(b, t...)
	}
	b = append(b, '"')
	for _, c := range t {
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return append(b, '"')
}
