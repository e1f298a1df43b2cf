// Package ddlcheck keeps the text a chain records out of the SQL a target
// runs unless it has been checked. A chain's schema carries type names,
// defaults, generation expressions, constraint, index and partition
// definitions and the CREATE statements of user-defined types as text;
// anyone who can write the store can rewrite that text, and a content ID
// is a checksum anyone can recompute. So every reader (restore, the
// broker, verify-chain) passes the recorded schema through this package
// first: each text is parsed by the dialect's own grammar, must be
// exactly one item of the expected kind built from an allowlisted set of
// node kinds, functions and names, and is then re-rendered from its
// parsed form. What does not pass is refused with
// SLUICE-E-CHAIN-SCHEMA-REFUSED naming the table, the column or object,
// and the text. docs/security.md states the rules.
package ddlcheck
