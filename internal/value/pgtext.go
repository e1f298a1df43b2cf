package value

import (
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

func decodeIntText(k Kind, text []byte) (Value, error) {
	bits := IntBits(k)
	s := string(text)
	if k.Unsigned {
		n, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return Value{}, textError(k, text, "%s", numError(err))
		}
		return Value{Uint: n}, nil
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return Value{}, textError(k, text, "%s", numError(err))
	}
	return Value{Int: n}, nil
}

// numError words a strconv error without repeating the input.
func numError(err error) string {
	if errors.Is(err, strconv.ErrRange) {
		return "out of range"
	}
	return "not a number"
}

func decodeFloatText(k Kind, text []byte) (Value, error) {
	s := string(text)
	switch strings.ToLower(s) {
	case "nan", "+nan", "-nan":
		return Value{Float: math.NaN()}, nil
	case "infinity", "+infinity", "inf", "+inf":
		return Value{Float: math.Inf(1)}, nil
	case "-infinity", "-inf":
		return Value{Float: math.Inf(-1)}, nil
	}
	if !floatSyntax(s) {
		// Go also reads hex floats and underscores; PostgreSQL does not.
		return Value{}, textError(k, text, "not a number")
	}
	f, err := strconv.ParseFloat(s, floatBits(k))
	if err != nil {
		return Value{}, textError(k, text, "%s", numError(err))
	}
	return Value{Float: f}, nil
}

// floatSyntax reports whether s is a decimal float: an optional sign,
// digits with an optional point, and an optional exponent.
func floatSyntax(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return false
	}
	if !hasExp {
		return true
	}
	if exp != "" && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	return exp != "" && allDigits(exp)
}

// formatFloat prints f the way PostgreSQL does with extra_float_digits 3:
// the shortest digits that read back as the same float, fixed-point for
// decimal exponents from -4 up to 14 (float8) or 5 (float4) and
// exponential ("1e+15", "1.5e-05") beyond.
func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	e := shortestFloat(f, bits) // "-1.2345e+06"
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp < -4 || exp >= limit {
		return e
	}
	neg := strings.HasPrefix(mant, "-")
	digits := strings.Replace(strings.TrimPrefix(mant, "-"), ".", "", 1)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if exp < 0 {
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -exp-1))
		b.WriteString(digits)
		return b.String()
	}
	if len(digits) <= exp+1 {
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", exp+1-len(digits)))
		return b.String()
	}
	b.WriteString(digits[:exp+1])
	b.WriteByte('.')
	b.WriteString(digits[exp+1:])
	return b.String()
}

// shortestFloat returns the shortest decimal, in Go's 'e' format, that
// lies strictly between f's neighbours' midpoints. Go's shortest form may
// lie exactly on a midpoint (which reads back as f under round-half-even);
// PostgreSQL never prints such a decimal, taking the shortest strictly
// inside instead. A short decimal can only be a midpoint where the
// midpoints are integers or halves, so smaller magnitudes skip the check.
func shortestFloat(f float64, bits int) string {
	s := strconv.FormatFloat(f, 'e', -1, bits)
	threshold, maxDigits := math.Ldexp(1, 52), 17
	if bits == 32 {
		threshold, maxDigits = math.Ldexp(1, 23), 9
	}
	if math.Abs(f) < threshold {
		return s
	}
	lo, hi := floatBounds(f, bits)
	if strictlyBetween(s, lo, hi) {
		return s
	}
	mant, _, _ := strings.Cut(s, "e")
	digits := len(strings.TrimLeft(strings.Replace(mant, ".", "", 1), "-"))
	for p := digits + 1; p < maxDigits; p++ {
		if c := trimMantissa(strconv.FormatFloat(f, 'e', p-1, bits)); strictlyBetween(c, lo, hi) {
			return c
		}
	}
	return trimMantissa(strconv.FormatFloat(f, 'e', maxDigits-1, bits))
}

// floatBounds returns the midpoints between f and its neighbours at the
// given width, exactly.
func floatBounds(f float64, bits int) (lo, hi *big.Rat) {
	var prev, next float64
	if bits == 32 {
		prev = float64(math.Nextafter32(float32(f), float32(math.Inf(-1))))
		next = float64(math.Nextafter32(float32(f), float32(math.Inf(1))))
	} else {
		prev, next = math.Nextafter(f, math.Inf(-1)), math.Nextafter(f, math.Inf(1))
	}
	x := new(big.Rat).SetFloat64(f)
	mid := func(n float64, other float64) *big.Rat {
		var r *big.Rat
		if math.IsInf(n, 0) { // beyond the largest float: mirror the gap
			r = new(big.Rat).SetFloat64(other)
			r.Sub(x, r)
			r.Add(x, r)
		} else {
			r = new(big.Rat).SetFloat64(n)
		}
		r.Add(r, x)
		return r.Quo(r, big.NewRat(2, 1))
	}
	return mid(prev, next), mid(next, prev)
}

// strictlyBetween reports whether the decimal s lies strictly between lo
// and hi.
func strictlyBetween(s string, lo, hi *big.Rat) bool {
	r, ok := new(big.Rat).SetString(s)
	return ok && r.Cmp(lo) > 0 && r.Cmp(hi) < 0
}

// trimMantissa drops trailing zeros from the mantissa of an 'e' format
// number ("1.2300e+17" → "1.23e+17").
func trimMantissa(s string) string {
	mant, exp, _ := strings.Cut(s, "e")
	if strings.Contains(mant, ".") {
		mant = strings.TrimSuffix(strings.TrimRight(mant, "0"), ".")
	}
	return mant + "e" + exp
}

func decodeBoolText(k Kind, text []byte) (Value, error) {
	switch strings.ToLower(string(text)) {
	case "t", "true":
		return Value{Bool: true}, nil
	case "f", "false":
		return Value{Bool: false}, nil
	}
	return Value{}, textError(k, text, "not a boolean (t or f)")
}

// decodeDecimalText reads a numeric's text and returns it in the canonical
// form PostgreSQL prints: no sign on zero, no leading zeros, the scale's
// trailing zeros kept.
func decodeDecimalText(k Kind, text []byte) (Value, error) {
	s, err := canonicalDecimal(k, string(text))
	if err != nil {
		return Value{}, textError(k, text, "%s", err)
	}
	return Value{Text: s}, nil
}

func encodeDecimalText(k Kind, v Value) ([]byte, error) {
	s, err := canonicalDecimal(k, v.Text)
	if err != nil {
		return nil, valueError(k, "%s %s", textExcerpt([]byte(v.Text)), err)
	}
	return []byte(s), nil
}

// canonicalDecimal checks a decimal's text and returns its canonical form.
func canonicalDecimal(k Kind, s string) (string, error) {
	special := ""
	switch strings.ToLower(s) {
	case "nan":
		special = "NaN"
	case "infinity", "+infinity", "inf", "+inf":
		special = "Infinity"
	case "-infinity", "-inf":
		special = "-Infinity"
	}
	if special != "" {
		if !k.Special {
			return "", errors.New("this decimal holds no NaN or infinity")
		}
		return special, nil
	}
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	intPart, frac, hasPoint := strings.Cut(s, ".")
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return "", errors.New("not a decimal number")
	}
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	zero := intPart == "0" && strings.Trim(frac, "0") == ""
	var b strings.Builder
	if neg && !zero {
		b.WriteByte('-')
	}
	b.WriteString(intPart)
	if hasPoint && frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String(), nil
}

// allDigits reports whether s holds only ASCII digits (true when empty).
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decodeByteaText reads bytea's hex output ("\x0a0b"), and its escape
// output too ("a\\b\001").
func decodeByteaText(k Kind, text []byte) (Value, error) {
	if len(text) >= 2 && text[0] == '\\' && (text[1] == 'x' || text[1] == 'X') {
		h := text[2:]
		if len(h)%2 != 0 {
			return Value{}, textError(k, text, "odd number of hex digits")
		}
		out := make([]byte, len(h)/2)
		if _, err := hex.Decode(out, h); err != nil {
			return Value{}, textError(k, text, "bad hex digit")
		}
		return Value{Bytes: out}, nil
	}
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(text) && text[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(text) && isOctal(text[i+1]) && text[i+1] <= '3' && isOctal(text[i+2]) && isOctal(text[i+3]):
			out = append(out, (text[i+1]-'0')<<6|(text[i+2]-'0')<<3|(text[i+3]-'0'))
			i += 3
		default:
			return Value{}, textError(k, text, "bad escape at byte %d", i)
		}
	}
	return Value{Bytes: out}, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func encodeByteaText(b []byte) []byte {
	out := make([]byte, 2+2*len(b))
	out[0], out[1] = '\\', 'x'
	hex.Encode(out[2:], b)
	return out
}

// decodeUUIDText reads a uuid in any form PostgreSQL reads (hyphens after
// any group of four digits, braces, upper case) and returns it lowercase
// in the 8-4-4-4-12 form.
func decodeUUIDText(k Kind, text []byte) (Value, error) {
	s, err := canonicalUUID(string(text))
	if err != nil {
		return Value{}, textError(k, text, "%s", err)
	}
	return Value{Text: s}, nil
}

func encodeUUIDText(k Kind, v Value) ([]byte, error) {
	s, err := canonicalUUID(v.Text)
	if err != nil {
		return nil, valueError(k, "%s %s", textExcerpt([]byte(v.Text)), err)
	}
	return []byte(s), nil
}

func canonicalUUID(s string) (string, error) {
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && len(s) >= 2 {
		s = s[1 : len(s)-1]
	}
	var raw [16]byte
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '-' && n > 0 && n%4 == 0 && n < 32 && i+1 < len(s) && s[i+1] != '-' {
			continue
		}
		d, ok := hexDigit(s[i])
		if !ok || n >= 32 {
			return "", errors.New("not a UUID")
		}
		raw[n/2] |= d << (4 * (1 - n%2))
		n++
	}
	if n != 32 {
		return "", errors.New("not a UUID")
	}
	return formatUUID(raw[:]), nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// formatUUID prints 16 bytes in the 8-4-4-4-12 lowercase form.
func formatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
