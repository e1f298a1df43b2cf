package ddlcheck

import (
	"fmt"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// pgTypeName checks a parsed type name: no SETOF or %TYPE; a name that
// resolves in the engine's catalog (unqualified, which the target's empty
// search_path resolves in pg_catalog alone, or qualified by pg_catalog),
// is a user type the chain records, or lives in the schema of an
// extension the chain records; type modifiers that are integer constants
// (an extension's or user type's may also be a string or a bare word, as
// PostGIS's geometry(Point,4326) is); array bounds that are integers.
func pgTypeName(t *pg_query.TypeName, names *Names) error {
	name, ok := strs(t.Names)
	what := strings.Join(name, ".")
	switch {
	case !ok || len(name) == 0:
		return fmt.Errorf("its type name is not a plain name")
	case t.Setof || t.PctType:
		return fmt.Errorf("its type %s is SETOF or %%TYPE", what)
	case len(name) > 2:
		return fmt.Errorf("its type name %s has more than a schema and a name", what)
	}
	catalog := len(name) == 1 || name[0] == "pg_catalog"
	if !catalog && !names.hasType(name[0], name[1]) && !names.extSchema(name[0]) {
		return fmt.Errorf("its type %s is neither the catalog's, nor a user type the chain records, nor an extension's", what)
	}
	for _, m := range t.Typmods {
		c := m.GetAConst()
		switch {
		case c != nil && c.GetIval() != nil:
		case !catalog && c != nil && c.GetSval() != nil:
		case !catalog && m.GetColumnRef() != nil && len(m.GetColumnRef().Fields) == 1 && m.GetColumnRef().Fields[0].GetString_() != nil:
		default:
			return fmt.Errorf("type %s has a modifier that is not a constant", what)
		}
	}
	for _, b := range t.ArrayBounds {
		if b.GetInteger() == nil {
			return fmt.Errorf("type %s has an array bound that is not an integer", what)
		}
	}
	return nil
}

// Placeholder statement a recorded type is parsed inside.
const (
	pgTypePrefix = "CREATE TABLE x (c "
	pgTypeSuffix = ")"
)

// PGType checks a recorded PostgreSQL column type and returns it rendered
// again from its parse tree: it must be exactly one type name (pgTypeName)
// with nothing after it, no COLLATE, default or constraint.
func PGType(w Where, text string, names *Names) (string, error) {
	out, err := pgType(text, names)
	if err != nil {
		return "", refuse(w, text, "%v", err)
	}
	return out, nil
}

func pgType(text string, names *Names) (string, error) {
	tree, err := pgOne(pgTypePrefix + text + pgTypeSuffix)
	if err != nil {
		return "", err
	}
	cs := tree.Stmts[0].Stmt.GetCreateStmt()
	if cs == nil || len(cs.TableElts) != 1 || cs.Partspec != nil || cs.Partbound != nil || len(cs.InhRelations) > 0 ||
		len(cs.Options) > 0 || cs.Tablespacename != "" || cs.AccessMethod != "" || cs.OfTypename != nil {
		return "", fmt.Errorf("it is not one type name")
	}
	cd := cs.TableElts[0].GetColumnDef()
	if cd == nil || cd.Colname != "c" || cd.TypeName == nil || len(cd.Constraints) > 0 || cd.CollClause != nil ||
		cd.RawDefault != nil || cd.Compression != "" || cd.StorageName != "" || len(cd.Fdwoptions) > 0 {
		return "", fmt.Errorf("it is not one type name")
	}
	if err := pgTypeName(cd.TypeName, names); err != nil {
		return "", err
	}
	return pgDeparseCut(tree, pgTypePrefix, pgTypeSuffix)
}
