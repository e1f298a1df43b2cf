package value

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PostgreSQL's epoch (2000-01-01 UTC) in Unix seconds and days.
const (
	pgEpochUnix = 946684800
	pgEpochDays = 10957
)

const (
	microsPerSecond = 1_000_000
	microsPerMinute = 60 * microsPerSecond
	microsPerHour   = 60 * microsPerMinute
	microsPerDay    = 24 * microsPerHour
	secondsPerDay   = 86400
)

// The ranges PostgreSQL's types hold, in its own terms: timestamps from
// 4714-11-24 BC up to (not including) 294277-01-01, in seconds since 2000;
// dates up to (not including) 5874898-01-01, in days since 2000.
const (
	minTimestampSeconds = -211813488000
	endTimestampSeconds = 9223371331200
	minDateDays         = -2451545
	endDateDays         = 2145031949
	// maxZoneSeconds is the first time zone offset PostgreSQL refuses:
	// offsets run up to ±15:59:59.
	maxZoneSeconds = 16 * 3600
)

// timestampInRange reports whether t (UTC) is a timestamp PostgreSQL holds.
func timestampInRange(t time.Time) bool {
	s := t.Unix() - pgEpochUnix
	return s >= minTimestampSeconds && s < endTimestampSeconds
}

// dateInRange reports whether days since 2000-01-01 is a date PostgreSQL
// holds (±infinity aside).
func dateInRange(days int64) bool { return days >= minDateDays && days < endDateDays }

// dateFromDays is UTC midnight of the day days after 2000-01-01.
func dateFromDays(days int64) time.Time {
	return time.Unix((days+pgEpochDays)*secondsPerDay, 0).UTC()
}

// timeFromMicros is the instant micros microseconds after 2000-01-01 UTC.
func timeFromMicros(us int64) time.Time {
	sec, rem := us/microsPerSecond, us%microsPerSecond
	if rem < 0 {
		sec, rem = sec-1, rem+microsPerSecond
	}
	return time.Unix(sec+pgEpochUnix, rem*1000).UTC()
}

// scanner walks text being parsed.
type scanner struct {
	s string
	i int
}

func (p *scanner) done() bool { return p.i >= len(p.s) }

// accept consumes c if it is next.
func (p *scanner) accept(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// digits consumes a run of at least min and at most max ASCII digits
// (max 0: no limit) and returns them.
func (p *scanner) digits(min, max int) (string, bool) {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' && (max == 0 || p.i-start < max) {
		p.i++
	}
	if p.i-start < min {
		return "", false
	}
	return p.s[start:p.i], true
}

// number consumes digits as in digits and returns their value.
func (p *scanner) number(min, max int) (int, bool) {
	d, ok := p.digits(min, max)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(d)
	return n, err == nil
}

var errSyntax = errors.New("not in PostgreSQL's ISO format")

// date consumes "Y…Y-MM-DD" and returns it (the year as printed).
func (p *scanner) date() (year, month, day int, err error) {
	var ok bool
	if year, ok = p.number(1, 9); !ok || !p.accept('-') {
		return 0, 0, 0, errSyntax
	}
	if month, ok = p.number(2, 2); !ok || !p.accept('-') {
		return 0, 0, 0, errSyntax
	}
	if day, ok = p.number(2, 2); !ok {
		return 0, 0, 0, errSyntax
	}
	return year, month, day, nil
}

// clock consumes "HH:MM:SS[.ffffff]" and returns microseconds since
// midnight; allow24 admits 24:00:00 (time of day) besides 00:00:00 up to
// 23:59:59.999999.
func (p *scanner) clock(allow24 bool) (int64, error) {
	h, ok := p.number(2, 2)
	if !ok || !p.accept(':') {
		return 0, errSyntax
	}
	m, ok := p.number(2, 2)
	if !ok || !p.accept(':') {
		return 0, errSyntax
	}
	s, ok := p.number(2, 2)
	if !ok {
		return 0, errSyntax
	}
	var frac int64
	if p.accept('.') {
		f, ok := p.digits(1, 0)
		if !ok {
			return 0, errSyntax
		}
		if len(f) > 6 {
			return 0, errors.New("more than microsecond precision")
		}
		n, _ := strconv.Atoi(f + strings.Repeat("0", 6-len(f)))
		frac = int64(n)
	}
	if m > 59 || s > 59 || h > 24 || h == 24 && (!allow24 || m != 0 || s != 0 || frac != 0) {
		return 0, errors.New("time of day out of range")
	}
	return int64(h)*microsPerHour + int64(m)*microsPerMinute + int64(s)*microsPerSecond + frac, nil
}

// zone consumes "±HH[:MM[:SS]]" and returns the offset in seconds east of
// UTC.
func (p *scanner) zone() (int32, error) {
	sign := int32(1)
	switch {
	case p.accept('+'):
	case p.accept('-'):
		sign = -1
	default:
		return 0, errors.New("no zone offset")
	}
	h, ok := p.number(2, 2)
	if !ok {
		return 0, errSyntax
	}
	var m, s int
	if p.accept(':') {
		if m, ok = p.number(2, 2); !ok {
			return 0, errSyntax
		}
		if p.accept(':') {
			if s, ok = p.number(2, 2); !ok {
				return 0, errSyntax
			}
		}
	}
	off := int32(h*3600 + m*60 + s)
	if m > 59 || s > 59 || off >= maxZoneSeconds {
		return 0, errors.New("zone offset out of range")
	}
	return sign * off, nil
}

// cutBC removes a trailing " BC" era.
func cutBC(s string) (string, bool) { return strings.CutSuffix(s, " BC") }

// civilDate checks a printed date and returns it as UTC midnight; a BC
// year is turned into Go's astronomical numbering (1 BC is year 0).
func civilDate(year, month, day int, bc bool) (time.Time, error) {
	if year == 0 {
		return time.Time{}, errors.New("year 0 does not exist")
	}
	if bc {
		year = 1 - year
	}
	if month < 1 || month > 12 || day < 1 {
		return time.Time{}, errors.New("date out of range")
	}
	t := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC)
	if t.Day() != day {
		return time.Time{}, errors.New("date out of range")
	}
	return t, nil
}

// infinity reads PostgreSQL's infinite dates and timestamps.
func infinity(s string) int8 {
	switch s {
	case "infinity":
		return 1
	case "-infinity":
		return -1
	}
	return 0
}

func decodeDateText(k Kind, text []byte) (Value, error) {
	s := string(text)
	if inf := infinity(s); inf != 0 {
		return Value{Infinite: inf}, nil
	}
	s, bc := cutBC(s)
	p := &scanner{s: s}
	y, m, d, err := p.date()
	if err == nil && !p.done() {
		err = errSyntax
	}
	var t time.Time
	if err == nil {
		t, err = civilDate(y, m, d, bc)
	}
	if err == nil && !dateInRange(t.Unix()/secondsPerDay-pgEpochDays) {
		err = errors.New("date out of range")
	}
	if err != nil {
		return Value{}, textError(k, text, "%s", err)
	}
	return Value{Time: t}, nil
}

func decodeTimestampText(k Kind, text []byte) (Value, error) {
	s := string(text)
	if inf := infinity(s); inf != 0 {
		return Value{Infinite: inf}, nil
	}
	t, err := parseTimestamp(s, k.Name == TimestampTZ)
	if err != nil {
		return Value{}, textError(k, text, "%s", err)
	}
	return Value{Time: t}, nil
}

// parseTimestamp reads "date time[zone][ BC]"; zoned admits a zone offset
// (UTC when there is none), unzoned refuses one.
func parseTimestamp(s string, zoned bool) (time.Time, error) {
	s, bc := cutBC(s)
	p := &scanner{s: s}
	y, m, d, err := p.date()
	if err != nil {
		return time.Time{}, err
	}
	if !p.accept(' ') && !p.accept('T') {
		return time.Time{}, errSyntax
	}
	us, err := p.clock(false)
	if err != nil {
		return time.Time{}, err
	}
	var off int32
	if zoned && !p.done() {
		if off, err = p.zone(); err != nil {
			return time.Time{}, err
		}
	}
	if !p.done() {
		return time.Time{}, errSyntax
	}
	t, err := civilDate(y, m, d, bc)
	if err != nil {
		return time.Time{}, err
	}
	t = t.Add(time.Duration(us)*time.Microsecond - time.Duration(off)*time.Second)
	if !timestampInRange(t) {
		return time.Time{}, errors.New("timestamp out of range")
	}
	return t, nil
}

func decodeTimeText(k Kind, text []byte) (Value, error) {
	p := &scanner{s: string(text)}
	us, err := p.clock(true)
	var off int32
	if err == nil && k.Zoned {
		off, err = p.zone()
	}
	if err == nil && !p.done() {
		err = errSyntax
	}
	if err != nil {
		return Value{}, textError(k, text, "%s", err)
	}
	return Value{Micros: us, Offset: off}, nil
}

// appendYearDate prints t's date as PostgreSQL does: the year in at least
// four digits, the era apart (returned for the caller to append last).
func appendYearDate(b []byte, t time.Time) ([]byte, bool) {
	y := t.Year()
	bc := y <= 0
	if bc {
		y = 1 - y
	}
	return fmt.Appendf(b, "%04d-%02d-%02d", y, int(t.Month()), t.Day()), bc
}

// appendClock prints microseconds since midnight as HH:MM:SS with the
// fraction's trailing zeros dropped.
func appendClock(b []byte, us int64) []byte {
	b = fmt.Appendf(b, "%02d:%02d:%02d", us/microsPerHour, us/microsPerMinute%60, us/microsPerSecond%60)
	return appendFraction(b, us%microsPerSecond)
}

// appendFraction prints a non-zero count of microseconds as ".ffffff"
// without trailing zeros.
func appendFraction(b []byte, us int64) []byte {
	if us == 0 {
		return b
	}
	f := strings.TrimRight(fmt.Sprintf("%06d", us), "0")
	return append(append(b, '.'), f...)
}

// appendZone prints an offset east of UTC as ±HH[:MM[:SS]].
func appendZone(b []byte, off int32) []byte {
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = fmt.Appendf(b, "%c%02d", sign, off/3600)
	if off%3600 != 0 {
		b = fmt.Appendf(b, ":%02d", off/60%60)
		if off%60 != 0 {
			b = fmt.Appendf(b, ":%02d", off%60)
		}
	}
	return b
}

func encodeDateText(k Kind, v Value) ([]byte, error) {
	if v.Infinite != 0 {
		return encodeInfinity(v.Infinite), nil
	}
	t := v.Time.UTC()
	if h, m, s := t.Clock(); h != 0 || m != 0 || s != 0 || t.Nanosecond() != 0 {
		return nil, valueError(k, "%s has a time of day", t.Format(time.RFC3339Nano))
	}
	if !dateInRange(t.Unix()/secondsPerDay - pgEpochDays) {
		return nil, valueError(k, "%s is out of PostgreSQL's date range", t.Format(time.DateOnly))
	}
	b, bc := appendYearDate(nil, t)
	if bc {
		b = append(b, " BC"...)
	}
	return b, nil
}

func encodeTimestampText(k Kind, v Value) ([]byte, error) {
	if v.Infinite != 0 {
		return encodeInfinity(v.Infinite), nil
	}
	t := v.Time.UTC()
	if t.Nanosecond()%1000 != 0 {
		return nil, valueError(k, "%s is finer than a microsecond", t.Format(time.RFC3339Nano))
	}
	if !timestampInRange(t) {
		return nil, valueError(k, "%s is out of PostgreSQL's timestamp range", t.Format(time.RFC3339Nano))
	}
	b, bc := appendYearDate(nil, t)
	b = append(b, ' ')
	h, m, s := t.Clock()
	b = appendClock(b, int64(h)*microsPerHour+int64(m)*microsPerMinute+int64(s)*microsPerSecond+int64(t.Nanosecond()/1000))
	if k.Name == TimestampTZ {
		b = append(b, "+00"...)
	}
	if bc {
		b = append(b, " BC"...)
	}
	return b, nil
}

func encodeInfinity(inf int8) []byte {
	if inf > 0 {
		return []byte("infinity")
	}
	return []byte("-infinity")
}

func encodeTimeText(k Kind, v Value) ([]byte, error) {
	if v.Micros < 0 || v.Micros > microsPerDay {
		return nil, valueError(k, "%d microseconds is no time of day", v.Micros)
	}
	if !k.Zoned {
		if v.Offset != 0 {
			return nil, valueError(k, "a time without zone has offset %d", v.Offset)
		}
		return appendClock(nil, v.Micros), nil
	}
	if v.Offset >= maxZoneSeconds || v.Offset <= -maxZoneSeconds {
		return nil, valueError(k, "zone offset %d seconds is out of range", v.Offset)
	}
	return appendZone(appendClock(nil, v.Micros), v.Offset), nil
}
