package value

import "testing"

func TestConstantDefaults(t *testing.T) {
	for expr, want := range map[string]string{
		"0": "0", "(-1)": "-1", "1.5e3": "1.5e3", "'a''b'::text": "a'b", "'2024-01-01'::date": "2024-01-01",
		"true": "t", "false": "f", "'{}'::text[]": "{}", "'x'::character varying": "x",
	} {
		if got, isNull, ok := ConstantDefault(expr); !ok || isNull || got != want {
			t.Errorf("ConstantDefault(%q) = %q, %t, %t; want %q", expr, got, isNull, ok, want)
		}
	}
	if _, isNull, ok := ConstantDefault("NULL::text"); !ok || !isNull {
		t.Error("NULL::text is a NULL constant")
	}
	for _, expr := range []string{"now()", "nextval('s'::regclass)", "CURRENT_TIMESTAMP", "(1 + 2)", "gen_random_uuid()", "'a'::text || 'b'::text"} {
		if _, _, ok := ConstantDefault(expr); ok {
			t.Errorf("ConstantDefault(%q) read as a constant", expr)
		}
	}
}
