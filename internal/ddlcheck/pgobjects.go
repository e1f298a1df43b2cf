package ddlcheck

import (
	"slices"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/sluicehq/sluice/internal/chain"
)

// pgIndexMethods are the index access methods a recorded index may use.
var pgIndexMethods = []string{"btree", "hash", "gist", "gin", "brin", "spgist"}

// PGIndex checks a recorded CREATE INDEX of table t and returns it
// rendered again: exactly one CREATE [UNIQUE] INDEX named ix.Name on t
// itself (not CONCURRENTLY), with a built-in access method, key columns
// or allowlisted expressions, catalog or extension operator classes,
// storage options and an allowlisted WHERE predicate.
func PGIndex(t *chain.Table, ix chain.Index, names *Names) (string, error) {
	w := Where{Table: t.QualifiedName(), Column: "index " + ix.Name, What: "index definition"}
	tree, err := pgOne(ix.Definition)
	if err != nil {
		return "", refuse(w, ix.Definition, "%v", err)
	}
	st := tree.Stmts[0].Stmt.GetIndexStmt()
	switch {
	case st == nil:
		return "", refuse(w, ix.Definition, "it is not a CREATE INDEX")
	case st.Idxname != ix.Name || st.Relation == nil || st.Relation.Schemaname != t.Schema || st.Relation.Relname != t.Name || st.Relation.Catalogname != "":
		return "", refuse(w, ix.Definition, "it does not create index %s on %s", ix.Name, t.QualifiedName())
	case st.Concurrent || st.Primary || st.Isconstraint || st.Unique != ix.Unique || !slices.Contains(pgIndexMethods, st.AccessMethod):
		return "", refuse(w, ix.Definition, "it is not a plain index of a built-in access method")
	}
	walk := &pgWalker{names: names, nodes: append([]string{"IndexStmt", "RangeVar", "IndexElem", "DefElem"}, pgExprNodes...), columns: true,
		defNames: []string{"fillfactor", "deduplicate_items", "buffering", "fastupdate", "gin_pending_list_limit", "pages_per_range", "autosummarize", "siglen"}}
	if err := walk.walk(st.ProtoReflect()); err != nil {
		return "", refuse(w, ix.Definition, "%v", err)
	}
	out, err := pgDeparse(tree)
	if err != nil {
		return "", refuse(w, ix.Definition, "%v", err)
	}
	return out, nil
}

// pgConstraintKinds maps a recorded constraint type to the parse tree's.
var pgConstraintKinds = map[string]pg_query.ConstrType{
	"c": pg_query.ConstrType_CONSTR_CHECK,
	"f": pg_query.ConstrType_CONSTR_FOREIGN,
	"x": pg_query.ConstrType_CONSTR_EXCLUSION,
}

const pgConstraintPrefix = "ALTER TABLE x ADD CONSTRAINT c "

// PGConstraint checks a recorded CHECK, FOREIGN KEY or EXCLUDE definition
// of table t and returns it rendered again: it must parse, after ADD
// CONSTRAINT, as exactly one constraint of its recorded type whose
// expressions pass PGExpr's rules.
func PGConstraint(t *chain.Table, c chain.Constraint, names *Names) (string, error) {
	w := Where{Table: t.QualifiedName(), Column: "constraint " + c.Name, What: "constraint definition"}
	kind, ok := pgConstraintKinds[c.Type]
	if !ok {
		return "", refuse(w, c.Definition, "its recorded type %q is none of c, f and x", c.Type)
	}
	tree, err := pgOne(pgConstraintPrefix + c.Definition)
	if err != nil {
		return "", refuse(w, c.Definition, "%v", err)
	}
	at := tree.Stmts[0].Stmt.GetAlterTableStmt()
	if at == nil || len(at.Cmds) != 1 || at.GetRelation().GetRelname() != "x" || at.GetRelation().GetSchemaname() != "" {
		return "", refuse(w, c.Definition, "it is not one constraint")
	}
	cmd := at.Cmds[0].GetAlterTableCmd()
	con := cmd.GetDef().GetConstraint()
	if cmd == nil || cmd.Subtype != pg_query.AlterTableType_AT_AddConstraint || con == nil || con.Conname != "c" || con.Contype != kind {
		return "", refuse(w, c.Definition, "it is not one constraint of type %q", c.Type)
	}
	walk := &pgWalker{names: names, nodes: append([]string{"Constraint", "RangeVar", "IndexElem", "DefElem"}, pgExprNodes...), columns: true,
		constraints: []pg_query.ConstrType{kind}}
	if err := walk.walk(con.ProtoReflect()); err != nil {
		return "", refuse(w, c.Definition, "%v", err)
	}
	out, err := pgDeparseCut(tree, pgConstraintPrefix, "")
	if err != nil {
		return "", refuse(w, c.Definition, "%v", err)
	}
	return out, nil
}

const pgBoundPrefix = "ALTER TABLE x ATTACH PARTITION y "

// PGPartitionBound checks a recorded partition bound of table t (FOR
// VALUES …, or DEFAULT) and returns it rendered again: its values must be
// constants (or MINVALUE and MAXVALUE), casts of them and allowlisted
// expressions.
func PGPartitionBound(t *chain.Table, names *Names) (string, error) {
	w := Where{Table: t.QualifiedName(), What: "partition bound"}
	tree, err := pgOne(pgBoundPrefix + t.PartitionBound)
	if err != nil {
		return "", refuse(w, t.PartitionBound, "%v", err)
	}
	at := tree.Stmts[0].Stmt.GetAlterTableStmt()
	if at == nil || len(at.Cmds) != 1 || at.GetRelation().GetRelname() != "x" || at.GetRelation().GetSchemaname() != "" {
		return "", refuse(w, t.PartitionBound, "it is not one partition bound")
	}
	cmd := at.Cmds[0].GetAlterTableCmd()
	pc := cmd.GetDef().GetPartitionCmd()
	if cmd == nil || cmd.Subtype != pg_query.AlterTableType_AT_AttachPartition || pc == nil || pc.Concurrent ||
		pc.GetName().GetRelname() != "y" || pc.GetName().GetSchemaname() != "" || pc.Bound == nil {
		return "", refuse(w, t.PartitionBound, "it is not one partition bound")
	}
	walk := &pgWalker{names: names, nodes: append([]string{"PartitionBoundSpec"}, pgExprNodes...), columns: true}
	if err := walk.walk(pc.Bound.ProtoReflect()); err != nil {
		return "", refuse(w, t.PartitionBound, "%v", err)
	}
	out, err := pgDeparseCut(tree, pgBoundPrefix, "")
	if err != nil {
		return "", refuse(w, t.PartitionBound, "%v", err)
	}
	return out, nil
}

const (
	pgKeyPrefix = "CREATE TABLE x () PARTITION BY "
)

// PGPartitionKey checks the recorded partition key of table t (RANGE (at),
// LIST (lower(kind)), HASH (id)) and returns it rendered again.
func PGPartitionKey(t *chain.Table, names *Names) (string, error) {
	w := Where{Table: t.QualifiedName(), What: "partition key"}
	tree, err := pgOne(pgKeyPrefix + t.PartitionKey)
	if err != nil {
		return "", refuse(w, t.PartitionKey, "%v", err)
	}
	cs := tree.Stmts[0].Stmt.GetCreateStmt()
	if cs == nil || len(cs.TableElts) > 0 || cs.Partspec == nil || cs.Partbound != nil || len(cs.InhRelations) > 0 ||
		len(cs.Options) > 0 || cs.AccessMethod != "" || cs.Tablespacename != "" || cs.OfTypename != nil {
		return "", refuse(w, t.PartitionKey, "it is not one partition key")
	}
	walk := &pgWalker{names: names, nodes: append([]string{"PartitionSpec", "PartitionElem"}, pgExprNodes...), columns: true}
	if err := walk.walk(cs.Partspec.ProtoReflect()); err != nil {
		return "", refuse(w, t.PartitionKey, "%v", err)
	}
	out, err := pgDeparseCut(tree, pgKeyPrefix, "")
	if err != nil {
		return "", refuse(w, t.PartitionKey, "%v", err)
	}
	return out, nil
}

// PGUserType checks the recorded CREATE statement of user type u and
// returns it rendered again: exactly one CREATE DOMAIN, CREATE TYPE … AS
// (composite), AS RANGE or AS ENUM, as its kind says, creating u itself,
// with types, defaults and CHECKs that pass the rules of PGType and
// PGExpr, and range options limited to the subtype, its operator class,
// collation, difference function (of the catalog) and multirange name.
func PGUserType(u chain.UserType, names *Names) (string, error) {
	w := Where{Column: "type " + u.Schema + "." + u.Name, What: "type definition"}
	tree, err := pgOne(u.Definition)
	if err != nil {
		return "", refuse(w, u.Definition, "%v", err)
	}
	stmt := tree.Stmts[0].Stmt
	same := func(nodes []*pg_query.Node) bool {
		n, ok := strs(nodes)
		return ok && len(n) == 2 && n[0] == u.Schema && n[1] == u.Name
	}
	walk := &pgWalker{names: names, nodes: pgExprNodes, columns: true}
	var root *pg_query.Node
	switch u.Kind {
	case chain.TypeDomain:
		d := stmt.GetCreateDomainStmt()
		if d == nil || !same(d.Domainname) {
			return "", refuse(w, u.Definition, "it does not create domain %s.%s", u.Schema, u.Name)
		}
		walk.nodes = append(walk.nodes, "CreateDomainStmt", "Constraint")
		walk.constraints = []pg_query.ConstrType{pg_query.ConstrType_CONSTR_CHECK, pg_query.ConstrType_CONSTR_NOTNULL,
			pg_query.ConstrType_CONSTR_NULL, pg_query.ConstrType_CONSTR_DEFAULT}
	case chain.TypeComposite:
		c := stmt.GetCompositeTypeStmt()
		if c == nil || c.Typevar == nil || c.Typevar.Schemaname != u.Schema || c.Typevar.Relname != u.Name || c.Typevar.Catalogname != "" {
			return "", refuse(w, u.Definition, "it does not create composite type %s.%s", u.Schema, u.Name)
		}
		walk.nodes = append(walk.nodes, "CompositeTypeStmt", "RangeVar", "ColumnDef")
	case chain.TypeRange:
		r := stmt.GetCreateRangeStmt()
		if r == nil || !same(r.TypeName) {
			return "", refuse(w, u.Definition, "it does not create range type %s.%s", u.Schema, u.Name)
		}
		walk.nodes = append(walk.nodes, "CreateRangeStmt", "DefElem")
		walk.defNames = []string{"subtype", "subtype_opclass", "collation", "subtype_diff", "multirange_type_name"}
		for _, p := range r.Params {
			d := p.GetDefElem()
			if d != nil && d.Defname == "subtype_diff" {
				// A function the range calls: the catalog's only.
				n, _ := strs(d.GetArg().GetTypeName().GetNames())
				if len(n) == 0 || len(n) > 2 || len(n) == 2 && n[0] != "pg_catalog" {
					return "", refuse(w, u.Definition, "its subtype difference function is not the catalog's")
				}
			}
			if d != nil && d.Defname == "multirange_type_name" {
				if tn := d.GetArg().GetTypeName(); tn != nil {
					// Created with the range, so no user type yet.
					if n, ok := strs(tn.Names); ok && len(n) == 2 && n[0] == u.Schema {
						names.AddType(n[0], n[1])
					}
				}
			}
		}
	case chain.TypeEnum:
		e := stmt.GetCreateEnumStmt()
		if e == nil || !same(e.TypeName) {
			return "", refuse(w, u.Definition, "it does not create enum type %s.%s", u.Schema, u.Name)
		}
		walk.nodes = append(walk.nodes, "CreateEnumStmt")
	default:
		return "", refuse(w, u.Definition, "its kind %q is none sluice records", u.Kind)
	}
	root = stmt
	if err := walk.walk(root.ProtoReflect()); err != nil {
		return "", refuse(w, u.Definition, "%v", err)
	}
	out, err := pgDeparse(tree)
	if err != nil {
		return "", refuse(w, u.Definition, "%v", err)
	}
	return out, nil
}
