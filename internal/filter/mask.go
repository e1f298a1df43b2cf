package filter

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Strategy names of --mask.
const (
	StrategyNull     = "null"
	StrategyFixed    = "fixed"
	StrategyHash     = "hash"
	StrategyEmail    = "email"
	StrategyTruncate = "truncate"
	StrategyKeepLast = "keep-last"
)

// hashLen is the length of a hash mask's output (hex of HMAC-SHA256), and
// emailHashLen that of an email mask's local part.
const (
	hashLen      = 64
	emailHashLen = 16
)

// Strategy is one parsed masking strategy.
type Strategy struct {
	// Name is one of the Strategy* names.
	Name string
	// Value is fixed's VALUE.
	Value string
	// N is truncate's and keep-last's N.
	N int
}

// ParseStrategy parses a --mask strategy: null, fixed:VALUE, hash, email,
// truncate:N or keep-last:N.
func ParseStrategy(s string) (Strategy, error) {
	name, arg, hasArg := strings.Cut(s, ":")
	switch name {
	case StrategyNull, StrategyHash, StrategyEmail:
		if hasArg {
			return Strategy{}, fmt.Errorf("strategy %s takes no argument", name)
		}
		return Strategy{Name: name}, nil
	case StrategyFixed:
		if !hasArg {
			return Strategy{}, fmt.Errorf("strategy fixed needs a value: fixed:VALUE")
		}
		return Strategy{Name: name, Value: arg}, nil
	case StrategyTruncate, StrategyKeepLast:
		n, err := strconv.Atoi(arg)
		if !hasArg || err != nil || n < 0 || n > 1<<20 {
			return Strategy{}, fmt.Errorf("strategy %s needs a whole number of characters: %s:N", name, name)
		}
		return Strategy{Name: name, N: n}, nil
	}
	return Strategy{}, fmt.Errorf("unknown strategy %q (known: null, fixed:VALUE, hash, email, truncate:N, keep-last:N)", s)
}

// String is the strategy as --mask takes it.
func (s Strategy) String() string {
	switch s.Name {
	case StrategyFixed:
		return s.Name + ":" + s.Value
	case StrategyTruncate, StrategyKeepLast:
		return s.Name + ":" + strconv.Itoa(s.N)
	}
	return s.Name
}

// Keyed reports whether the strategy needs the mask key.
func (s Strategy) Keyed() bool { return s.Name == StrategyHash || s.Name == StrategyEmail }

// textOnly reports whether the strategy works on text values only.
func (s Strategy) textOnly() bool { return s.Name != StrategyNull && s.Name != StrategyFixed }

// keepsUnique reports whether distinct inputs stay distinct (so the
// strategy may mask a key or a unique column): the keyed hashes do, up to
// HMAC-SHA256 collisions.
func (s Strategy) keepsUnique() bool { return s.Keyed() }

// KeyID fingerprints a mask key for the chain's record: the first 16 hex
// characters of HMAC-SHA256(key, "sluice mask key id").
func KeyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("sluice mask key id"))
	return hex.EncodeToString(m.Sum(nil))[:16]
}

// applyText masks one non-NULL text value (UTF-8). It appends to dst.
func (s Strategy) applyText(dst []byte, key, v []byte) []byte {
	switch s.Name {
	case StrategyHash:
		return appendHMAC(dst, key, v, hashLen)
	case StrategyEmail:
		at := strings.LastIndexByte(string(v), '@')
		if at < 0 {
			return appendHMAC(dst, key, v, emailHashLen)
		}
		dst = appendHMAC(dst, key, v[:at], emailHashLen)
		return append(dst, v[at:]...)
	case StrategyTruncate:
		n, i := 0, 0
		for i < len(v) && n < s.N {
			_, size := utf8.DecodeRune(v[i:])
			i += size
			n++
		}
		return append(dst, v[:i]...)
	case StrategyKeepLast:
		total := utf8.RuneCount(v)
		hide := total - s.N
		i := 0
		for n := 0; n < hide; n++ {
			_, size := utf8.DecodeRune(v[i:])
			i += size
			dst = append(dst, '*')
		}
		return append(dst, v[i:]...)
	case StrategyFixed:
		return append(dst, s.Value...)
	}
	return dst
}

// appendHMAC appends the first n hex characters of HMAC-SHA256(key, v).
func appendHMAC(dst, key, v []byte, n int) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(v)
	var sum [sha256.Size]byte
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], m.Sum(sum[:0]))
	return append(dst, hx[:n]...)
}
