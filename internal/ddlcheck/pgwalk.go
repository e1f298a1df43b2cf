package ddlcheck

import (
	"fmt"
	"slices"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// pgExprNodes are the parse node kinds an expression may be built of:
// constants, casts, operators, boolean logic, CASE, COALESCE,
// GREATEST/LEAST, NULL tests, column references, array and row
// constructors, subscripts, COLLATE and calls of allowlisted functions.
// Subqueries, aggregates, window functions, parameters and everything
// else are refused.
var pgExprNodes = []string{
	"Node", "List", "A_Const", "Integer", "Float", "Boolean", "String", "BitString",
	"TypeCast", "TypeName", "FuncCall", "A_Expr", "BoolExpr", "NullTest", "BooleanTest",
	"CaseExpr", "CaseWhen", "CoalesceExpr", "MinMaxExpr", "SQLValueFunction", "ColumnRef",
	"A_ArrayExpr", "RowExpr", "A_Indirection", "A_Indices", "CollateClause", "NamedArgExpr",
}

// pgWalker checks a parse tree against an allowlist of node kinds and
// the names it may use.
type pgWalker struct {
	names *Names
	nodes []string
	// columns allows column references (not in a default).
	columns bool
	// constraints are the constraint kinds allowed; defNames the option
	// names a DefElem may have (none when empty).
	constraints []pg_query.ConstrType
	defNames    []string
}

// walk checks m and everything under it.
func (w *pgWalker) walk(m protoreflect.Message) error {
	kind := string(m.Descriptor().Name())
	if !slices.Contains(w.nodes, kind) {
		return fmt.Errorf("it holds a %s, which is not allowed there", kind)
	}
	if err := w.node(m.Interface()); err != nil {
		return err
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = w.walk(l.Get(i).Message())
			}
		case fd.IsMap():
			err = fmt.Errorf("it holds a map field %s", fd.Name())
		case fd.Message() != nil:
			err = w.walk(v.Message())
		}
		return err == nil
	})
	return err
}

// node checks one node's own names.
func (w *pgWalker) node(n any) error {
	switch n := n.(type) {
	case *pg_query.TypeName:
		return pgTypeName(n, w.names)
	case *pg_query.FuncCall:
		return w.funcCall(n)
	case *pg_query.A_Expr:
		name, ok := strs(n.Name)
		if !ok || !w.catalogName(name) {
			return fmt.Errorf("it uses operator %s, which is neither the catalog's nor an extension's", strings.Join(name, "."))
		}
	case *pg_query.ColumnRef:
		if !w.columns {
			return fmt.Errorf("it refers to a column, which is not allowed there")
		}
		if f, ok := strs(n.Fields); !ok || len(f) != 1 {
			return fmt.Errorf("it holds a column reference other than a plain column name")
		}
	case *pg_query.CollateClause:
		return w.collation(n.Collname)
	case *pg_query.IndexElem:
		if err := w.collation(n.Collation); err != nil {
			return err
		}
		return w.opclass(n.Opclass)
	case *pg_query.PartitionElem:
		if err := w.collation(n.Collation); err != nil {
			return err
		}
		return w.opclass(n.Opclass)
	case *pg_query.Constraint:
		if !slices.Contains(w.constraints, n.Contype) {
			return fmt.Errorf("it holds a constraint of kind %s, which is not allowed there", n.Contype)
		}
	case *pg_query.DefElem:
		if n.Defnamespace != "" || !slices.Contains(w.defNames, strings.ToLower(n.Defname)) {
			return fmt.Errorf("it sets option %s, which is not allowed there", n.Defname)
		}
	}
	return nil
}

// collation allows a collation of the catalog.
func (w *pgWalker) collation(nodes []*pg_query.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	name, ok := strs(nodes)
	if !ok || len(name) > 2 || (len(name) == 2 && name[0] != "pg_catalog") {
		return fmt.Errorf("it uses collation %s, which is not the catalog's", strings.Join(name, "."))
	}
	return nil
}

// opclass allows an operator class of the catalog or an extension.
func (w *pgWalker) opclass(nodes []*pg_query.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	name, ok := strs(nodes)
	if !ok || !w.catalogName(name) {
		return fmt.Errorf("it uses operator class %s, which is neither the catalog's nor an extension's", strings.Join(name, "."))
	}
	return nil
}

// catalogName reports whether a function or operator name resolves in the
// engine's catalog (unqualified, which the target's empty search_path
// resolves in pg_catalog alone, or qualified by pg_catalog) or in the
// schema of an extension the chain records.
func (w *pgWalker) catalogName(name []string) bool {
	switch len(name) {
	case 1:
		return true
	case 2:
		return name[0] == "pg_catalog" || w.names.extSchema(name[0])
	}
	return false
}

func (w *pgWalker) funcCall(f *pg_query.FuncCall) error {
	name, ok := strs(f.Funcname)
	if !ok || len(name) == 0 || len(name) > 2 {
		return fmt.Errorf("it calls a function by an unusable name")
	}
	what := strings.Join(name, ".")
	switch {
	case f.AggStar, f.AggDistinct, f.AggWithinGroup, f.FuncVariadic, f.AggFilter != nil, f.Over != nil, len(f.AggOrder) > 0:
		return fmt.Errorf("it calls %s as an aggregate, window or variadic function", what)
	case len(name) == 1 || name[0] == "pg_catalog":
		fn := name[len(name)-1]
		if fn == "nextval" {
			return nextvalArgs(f)
		}
		if !pgSafeFuncs[fn] {
			return fmt.Errorf("it calls function %s, which is not among the functions a recorded expression may call", what)
		}
	case w.names.extSchema(name[0]) && pgExtensionFuncs[name[1]]:
	default:
		return fmt.Errorf("it calls function %s, which is not among the functions a recorded expression may call", what)
	}
	return nil
}

// nextvalArgs allows nextval of one constant sequence name, as a sequence
// default records it: nextval('schema.seq'::regclass).
func nextvalArgs(f *pg_query.FuncCall) error {
	if len(f.Args) == 1 {
		a := f.Args[0]
		if tc := a.GetTypeCast(); tc != nil {
			if tn, _ := strs(tc.GetTypeName().GetNames()); len(tn) > 0 && tn[len(tn)-1] == "regclass" {
				a = tc.Arg
			}
		}
		if a.GetAConst().GetSval() != nil {
			return nil
		}
	}
	return fmt.Errorf("it calls nextval other than on one constant sequence name")
}

// pgSafeFuncs are the catalog functions a recorded expression may call:
// functions of their arguments and of the clock, with no effect beyond
// their result and no access to other data, files or the server.
var pgSafeFuncs = setOf(
	// clock and random values
	"now", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "timeofday",
	"gen_random_uuid", "uuidv4", "uuidv7", "random",
	// text
	"lower", "upper", "initcap", "length", "char_length", "character_length", "octet_length", "bit_length",
	"btrim", "ltrim", "rtrim", "substr", "substring", "left", "right", "replace", "concat", "concat_ws",
	"md5", "sha224", "sha256", "sha384", "sha512", "encode", "decode", "regexp_replace", "regexp_match",
	"regexp_like", "split_part", "position", "strpos", "lpad", "rpad", "repeat", "reverse", "translate",
	"overlay", "normalize", "is_normalized", "starts_with", "chr", "ascii", "quote_ident", "quote_literal",
	"quote_nullable", "format", "to_hex", "unistr", "casefold",
	// numbers
	"abs", "round", "trunc", "floor", "ceil", "ceiling", "sign", "mod", "power", "sqrt", "cbrt", "div",
	"log", "log10", "ln", "exp", "pi", "width_bucket", "scale", "min_scale", "trim_scale",
	// dates and times
	"to_char", "to_date", "to_timestamp", "to_number", "date_trunc", "date_part", "extract", "date_bin",
	"make_date", "make_time", "make_timestamp", "make_timestamptz", "make_interval", "timezone", "age",
	"isfinite", "justify_days", "justify_hours", "justify_interval", "overlaps",
	// json, arrays, ranges, text search, network
	"jsonb_build_object", "jsonb_build_array", "json_build_object", "json_build_array", "to_jsonb", "to_json",
	"jsonb_typeof", "json_typeof", "jsonb_extract_path", "jsonb_extract_path_text", "json_extract_path",
	"json_extract_path_text", "jsonb_strip_nulls", "jsonb_set", "jsonb_array_length", "array_length",
	"array_lower", "array_upper", "array_ndims", "array_dims", "cardinality", "array_to_string",
	"string_to_array", "array_position", "array_append", "array_prepend", "array_cat", "array_remove",
	"array_replace", "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
	"lower_inc", "upper_inc", "lower_inf", "upper_inf", "isempty", "to_tsvector", "setweight", "strip",
	"host", "network", "masklen", "family", "broadcast", "netmask", "abbrev", "text",
	"num_nonnulls", "num_nulls", "bool", "int4", "int8", "int2", "float4", "float8", "numeric", "varchar", "bpchar",
)

// pgExtensionFuncs are the functions of extensions a recorded expression
// may call, qualified by the schema of an extension the chain records:
// those of uuid-ossp and pgcrypto that only compute values.
var pgExtensionFuncs = setOf(
	"uuid_generate_v1", "uuid_generate_v1mc", "uuid_generate_v3", "uuid_generate_v4", "uuid_generate_v5",
	"uuid_nil", "uuid_ns_dns", "uuid_ns_url", "uuid_ns_oid", "uuid_ns_x500",
	"gen_random_uuid", "gen_random_bytes", "digest", "hmac",
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
