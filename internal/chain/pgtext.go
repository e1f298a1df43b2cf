package chain

// PostgresTextSettings returns the session settings under which PostgreSQL
// prints the values a chain carries as text (every value of a change
// record, which pgoutput sends in text, and the columns of a full recorded
// with EncodingText), and under which a PostgreSQL target reads them back.
// Pinning them on both sides makes a value's text form a function of the
// value alone, never of either cluster's configuration: ISO dates
// (unambiguous whatever the reader's field order), ISO 8601 intervals
// (the only style whose every value reads back, the smallest interval
// included, and whose signs no reader's IntervalStyle reinterprets),
// shortest exact floats, hex bytea, UTC, money in the C locale, and XML
// read as content.
func PostgresTextSettings() map[string]string {
	return map[string]string{
		"DateStyle":          "ISO",
		"IntervalStyle":      "iso_8601",
		"extra_float_digits": "3",
		"bytea_output":       "hex",
		"TimeZone":           "UTC",
		"lc_monetary":        "C",
		"xmloption":          "content",
	}
}
