package value

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// String names the kind with its parameters, as errors print it:
// "int(64)", "int(32,unsigned)", "decimal(40,20,special)", "float(32)",
// "time(zoned)", "enum(3 labels)", "array(text)".
func (k Kind) String() string {
	var params []string
	switch k.Name {
	case Int:
		if k.Width != 0 {
			params = append(params, strconv.Itoa(k.Width))
		}
		if k.Unsigned {
			params = append(params, "unsigned")
		}
	case Float:
		if k.Width != 0 {
			params = append(params, strconv.Itoa(k.Width))
		}
	case Decimal:
		if k.Precision != 0 {
			params = append(params, strconv.Itoa(k.Precision), strconv.Itoa(k.Scale))
		}
		if k.Special {
			params = append(params, "special")
		}
	case Time:
		if k.Zoned {
			params = append(params, "zoned")
		}
	case Enum:
		if len(k.Labels) > 0 {
			params = append(params, fmt.Sprintf("%d labels", len(k.Labels)))
		}
	case Array:
		if k.Elem != nil {
			params = append(params, k.Elem.String())
		}
	}
	name := string(k.Name)
	if name == "" {
		name = "(no kind)"
	}
	if len(params) == 0 {
		return name
	}
	return name + "(" + strings.Join(params, ",") + ")"
}

// excerptLimit is how much of an offending value an error quotes.
const excerptLimit = 48

// textExcerpt quotes text for an error, cut to excerptLimit bytes.
func textExcerpt(text []byte) string {
	if len(text) > excerptLimit {
		return strconv.Quote(string(text[:excerptLimit])) + fmt.Sprintf("… (%d bytes)", len(text))
	}
	return strconv.Quote(string(text))
}

// binaryExcerpt shows binary data for an error in hex, cut to half
// excerptLimit bytes.
func binaryExcerpt(data []byte) string {
	if len(data) > excerptLimit/2 {
		return hex.EncodeToString(data[:excerptLimit/2]) + fmt.Sprintf("… (%d bytes)", len(data))
	}
	return fmt.Sprintf("%x (%d bytes)", data, len(data))
}

// textError reports PostgreSQL text of kind k that does not decode.
func textError(k Kind, text []byte, format string, args ...any) error {
	return fmt.Errorf("value: %s text %s: %s", k, textExcerpt(text), fmt.Sprintf(format, args...))
}

// binaryError reports PostgreSQL binary data of kind k that does not decode.
func binaryError(k Kind, data []byte, format string, args ...any) error {
	return fmt.Errorf("value: %s binary %s: %s", k, binaryExcerpt(data), fmt.Sprintf(format, args...))
}

// valueError reports a value that kind k cannot encode.
func valueError(k Kind, format string, args ...any) error {
	return fmt.Errorf("value: encode %s: %s", k, fmt.Sprintf(format, args...))
}

// IntBits is the size in bits of an int kind's values: its Width (8, 16,
// 24, 32 or 64), or 64 when the kind records none.
func IntBits(k Kind) int {
	if k.Width <= 0 || k.Width > 64 {
		return 64
	}
	return k.Width
}

// IntFits reports whether v, a value of the int kind k (Uint when
// k.Unsigned, else Int), lies in the range of k's width and sign.
func IntFits(k Kind, v Value) bool {
	bits := IntBits(k)
	if k.Unsigned {
		return bits == 64 || v.Uint < 1<<bits
	}
	if bits == 64 {
		return true
	}
	limit := int64(1) << (bits - 1)
	return v.Int >= -limit && v.Int < limit
}
