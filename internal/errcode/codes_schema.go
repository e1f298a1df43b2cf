package errcode

// Schema fidelity: what a chain can carry and a target can recreate (exit 3).
var (
	SourceSchemaUnsupported = register("SLUICE-E-SOURCE-SCHEMA-UNSUPPORTED", ExitRefused,
		"The source schema uses something a chain cannot carry or a target could not recreate (a base type defined outside any extension, a reg* column, a default, check, index or type built on a function sluice does not copy); nothing of it was written.",
		"The message lists each table, column and object. Move the function or type into an extension installed on both sides, or change the column, default or constraint named, then run the backup again; a producer that met such a table while streaming resumes from its chain once started again (it reads the table as it stands then).")
	TargetExtensionMissing = register("SLUICE-E-TARGET-EXTENSION-MISSING", ExitRefused,
		"The chain's schema needs a PostgreSQL extension that the target server does not have available; nothing was dropped or written.",
		"Install the extension's files on the target server (for citext, hstore and the other contrib extensions: the postgresql-contrib package of its version), then run again; sluice runs CREATE EXTENSION itself.")
	TargetValueRefused = register("SLUICE-E-TARGET-VALUE-REFUSED", ExitRefused,
		"The target refused a value of the chain as invalid for its column (a PostgreSQL data exception, SQLSTATE class 22): a column narrower than the source's, a type changed on the target, a value its type cannot hold. Retrying cannot change that, so the run stops; what it applied before stays, exactly once.",
		"The message names the table, the change and the target's reason. Give the target column the source's type (or widen it), then run again: a broker resumes where it stopped, a restore can be run again with --replace-existing.")
)

// ChainSchemaRefused refuses a recorded schema whose text a reader will not
// send to a target: a type, default, expression, constraint, partition
// bound, index or type definition that does not parse as exactly one item
// of the expected kind, or uses a function or name outside what sluice
// records (docs/security.md).
var ChainSchemaRefused = register("SLUICE-E-CHAIN-SCHEMA-REFUSED", ExitRefused,
	"The chain's recorded schema holds text a reader will not send to a target: a type, default, generation expression, CHECK, partition bound, index or type definition, or a name, that does not parse as exactly one item of the kind expected, or uses a function, type or statement outside what sluice records. Nothing of it was sent to the target.",
	"The message names the table, column or object and the text. A chain written by sluice never records such text: treat the store as tampered with or damaged (see docs/security.md), restore from a chain you trust, and check who can write the store.")
