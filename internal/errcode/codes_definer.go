package errcode

// TargetDefinerMissing refuses MySQL-family schema objects whose DEFINER
// the target has no account for (exit 3).
var TargetDefinerMissing = register("SLUICE-E-TARGET-DEFINER-MISSING", ExitRefused,
	"A MySQL-family view, stored routine, trigger or event the chain records runs as a DEFINER account the target server does not have (or the definer given to replace them does not exist there). None of the chain's objects was created, replaced or dropped.",
	"Create the account the message names on the target (CREATE USER …, with the privileges the objects need), or pass --object-definer USER@HOST to create every recorded object with an account the target has instead (CURRENT_USER names the account sluice connects as).")
