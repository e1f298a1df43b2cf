package value

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

var errIntervalRange = errors.New("interval out of range")

// mul64 and add64 are int64 arithmetic that reports overflow.
func mul64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

func add64(a, b int64) (int64, bool) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, false
	}
	return c, true
}

// intervalSum accumulates an interval's fields with overflow checks.
type intervalSum struct {
	months, days, micros int64
	err                  error
}

// add adds n units of scale to *field (months, days or micros).
func (s *intervalSum) add(field *int64, n, scale int64) {
	if s.err != nil {
		return
	}
	v, ok := mul64(n, scale)
	if ok {
		v, ok = add64(*field, v)
	}
	if !ok {
		s.err = errIntervalRange
		return
	}
	*field = v
}

// value checks the fields fit PostgreSQL's interval and returns it.
func (s *intervalSum) value() (Value, error) {
	if s.err != nil {
		return Value{}, s.err
	}
	if s.months < math.MinInt32 || s.months > math.MaxInt32 || s.days < math.MinInt32 || s.days > math.MaxInt32 {
		return Value{}, errIntervalRange
	}
	if inf := infiniteInterval(int32(s.months), int32(s.days), s.micros); inf != 0 {
		// The extreme fields PostgreSQL 17 keeps for ±infinity; older
		// versions print them as a finite interval. Read as the binary
		// form reads them.
		return Value{Infinite: inf}, nil
	}
	return Value{Months: int32(s.months), Days: int32(s.days), Micros: s.micros}, nil
}

// infiniteInterval recognises the fields PostgreSQL (17 and later) keeps
// for an infinite interval: all maximal (+1) or all minimal (-1).
func infiniteInterval(months, days int32, micros int64) int8 {
	switch {
	case months == math.MaxInt32 && days == math.MaxInt32 && micros == math.MaxInt64:
		return 1
	case months == math.MinInt32 && days == math.MinInt32 && micros == math.MinInt64:
		return -1
	}
	return 0
}

// decodeIntervalText reads an interval in the iso_8601 style
// ("P1Y2M3DT4H5M6.789S", "PT0S") or the postgres style ("1 year 2 mons
// 3 days 04:05:06.789", "-00:00:01"), and "infinity"/"-infinity".
func decodeIntervalText(k Kind, text []byte) (Value, error) {
	s := string(text)
	if inf := infinity(s); inf != 0 {
		return Value{Infinite: inf}, nil
	}
	var v Value
	var err error
	if strings.HasPrefix(s, "P") {
		v, err = parseISOInterval(s)
	} else {
		v, err = parsePostgresInterval(s)
	}
	if err != nil {
		return Value{}, textError(k, text, "%s", err)
	}
	return v, nil
}

// signedNumber consumes an optional sign and digits and returns them
// ("-12"), or false when there are no digits.
func (p *scanner) signedNumber() (string, bool) {
	start := p.i
	if !p.accept('-') {
		p.accept('+')
	}
	if _, ok := p.digits(1, 0); !ok {
		return "", false
	}
	return p.s[start:p.i], true
}

// fraction consumes ".ddd" after a number of seconds and returns the
// microseconds it holds (at most six digits).
func (p *scanner) fraction() (int64, error) {
	if !p.accept('.') {
		return 0, nil
	}
	f, ok := p.digits(1, 0)
	if !ok {
		return 0, errSyntax
	}
	if len(f) > 6 {
		return 0, errors.New("more than microsecond precision")
	}
	n, _ := strconv.Atoi(f + strings.Repeat("0", 6-len(f)))
	return int64(n), nil
}

func parseISOInterval(s string) (Value, error) {
	p := &scanner{s: s, i: 1}
	var sum intervalSum
	inTime, seen := false, false
	for !p.done() {
		if p.accept('T') {
			if inTime {
				return Value{}, errSyntax
			}
			inTime = true
			continue
		}
		num, ok := p.signedNumber()
		if !ok {
			return Value{}, errSyntax
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return Value{}, errIntervalRange
		}
		frac, err := p.fraction()
		if err != nil {
			return Value{}, err
		}
		if p.done() {
			return Value{}, errSyntax
		}
		unit := p.s[p.i]
		p.i++
		if frac != 0 && !(inTime && unit == 'S') {
			return Value{}, errors.New("a fraction outside the seconds")
		}
		switch {
		case !inTime && unit == 'Y':
			sum.add(&sum.months, n, 12)
		case !inTime && unit == 'M':
			sum.add(&sum.months, n, 1)
		case !inTime && unit == 'W':
			sum.add(&sum.days, n, 7)
		case !inTime && unit == 'D':
			sum.add(&sum.days, n, 1)
		case inTime && unit == 'H':
			sum.add(&sum.micros, n, microsPerHour)
		case inTime && unit == 'M':
			sum.add(&sum.micros, n, microsPerMinute)
		case inTime && unit == 'S':
			if strings.HasPrefix(num, "-") {
				frac = -frac
			}
			sum.add(&sum.micros, n, microsPerSecond)
			sum.add(&sum.micros, frac, 1)
		default:
			return Value{}, errSyntax
		}
		seen = true
	}
	if !seen {
		return Value{}, errSyntax
	}
	return sum.value()
}

func parsePostgresInterval(s string) (Value, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Value{}, errSyntax
	}
	var sum intervalSum
	seenClock := false
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if strings.Contains(f, ":") {
			if seenClock {
				return Value{}, errSyntax
			}
			seenClock = true
			us, err := parseIntervalClock(f)
			if err != nil {
				return Value{}, err
			}
			sum.add(&sum.micros, us, 1)
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || i+1 == len(fields) {
			return Value{}, errSyntax
		}
		i++
		switch fields[i] {
		case "year", "years":
			sum.add(&sum.months, n, 12)
		case "mon", "mons":
			sum.add(&sum.months, n, 1)
		case "day", "days":
			sum.add(&sum.days, n, 1)
		default:
			return Value{}, errSyntax
		}
	}
	return sum.value()
}

// parseIntervalClock reads the postgres style's "[±]H…H:MM:SS[.ffffff]",
// whose hours are not bounded by a day.
func parseIntervalClock(f string) (int64, error) {
	p := &scanner{s: f}
	neg := p.accept('-')
	if !neg {
		p.accept('+')
	}
	h, ok := p.digits(1, 0)
	if !ok || !p.accept(':') {
		return 0, errSyntax
	}
	m, ok := p.number(2, 2)
	if !ok || !p.accept(':') {
		return 0, errSyntax
	}
	sec, ok := p.number(2, 2)
	if !ok || m > 59 || sec > 59 {
		return 0, errSyntax
	}
	frac, err := p.fraction()
	if err != nil {
		return 0, err
	}
	if !p.done() {
		return 0, errSyntax
	}
	hours, err := strconv.ParseInt(h, 10, 64)
	if err != nil {
		return 0, errIntervalRange
	}
	var sum intervalSum
	sign := int64(1)
	if neg {
		sign = -1
	}
	sum.add(&sum.micros, sign*hours, microsPerHour)
	sum.add(&sum.micros, sign*(int64(m)*microsPerMinute+int64(sec)*microsPerSecond+frac), 1)
	return sum.micros, sum.err
}

// encodeIntervalText prints v in the iso_8601 style, as PostgreSQL does
// under chain.PostgresTextSettings: each field with its own sign, the
// seconds' fraction without trailing zeros, "PT0S" for zero.
func encodeIntervalText(v Value) []byte {
	if v.Infinite != 0 {
		return encodeInfinity(v.Infinite)
	}
	years, months := v.Months/12, v.Months%12
	t := v.Micros
	hours := t / microsPerHour
	t -= hours * microsPerHour
	minutes := t / microsPerMinute
	t -= minutes * microsPerMinute
	secs := t / microsPerSecond
	frac := t - secs*microsPerSecond
	if years == 0 && months == 0 && v.Days == 0 && v.Micros == 0 {
		return []byte("PT0S")
	}
	b := []byte{'P'}
	part := func(n int64, unit byte) {
		if n != 0 {
			b = strconv.AppendInt(b, n, 10)
			b = append(b, unit)
		}
	}
	part(int64(years), 'Y')
	part(int64(months), 'M')
	part(int64(v.Days), 'D')
	if v.Micros != 0 {
		b = append(b, 'T')
	}
	part(hours, 'H')
	part(minutes, 'M')
	if secs != 0 || frac != 0 {
		if secs < 0 || frac < 0 {
			b = append(b, '-')
		}
		b = strconv.AppendInt(b, abs64(secs), 10)
		b = appendFraction(b, abs64(frac))
		b = append(b, 'S')
	}
	return b
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
