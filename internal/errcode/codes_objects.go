package errcode

// Codes of the recorded schema objects (views, routines, triggers, rules,
// policies, comments, grants) a restore or a broker creates on a target.
var (
	// ObjectRoleMissing is a recorded grant or policy that names a role the
	// target's cluster does not have.
	ObjectRoleMissing = register("SLUICE-E-TARGET-ROLE-MISSING", ExitRefused,
		"A recorded grant or row-level security policy names a role that does not exist on the target. Roles belong to the cluster, not to the database, so the chain does not carry them. None of the recorded schema objects was created or changed by this step; the tables and rows already applied stay.",
		"Create the roles the message names on the target (CREATE ROLE …) and run the command again, or pass --skip-missing-roles to create everything else and list the grants and policies of missing roles as skipped.")
)
