package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/testenv"
)

const testMode = "SET sql_mode = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION';\n"

// shopObjects are objects as a MariaDB source records them (SHOW CREATE
// texts without DEFINER), run as definer.
func shopObjects(db, definer string) []chain.Object {
	return []chain.Object{
		{Kind: chain.ObjectFunction, Schema: db, Name: "doubled", Definer: definer,
			Definition: testMode + "CREATE FUNCTION `doubled`(x int) RETURNS int(11)\n    DETERMINISTIC\nRETURN x * 2;"},
		{Kind: chain.ObjectProcedure, Schema: db, Name: "place", Definer: definer,
			Definition: testMode + "CREATE PROCEDURE `place`(IN n int)\nBEGIN INSERT INTO orders (amount) VALUES (n); SELECT COUNT(*) FROM orders; END;"},
		{Kind: chain.ObjectView, Schema: db, Name: "z_big", Definer: definer,
			Definition: "CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `z_big` AS select `orders`.`id` AS `id`,`orders`.`amount` AS `amount` from `orders` where `orders`.`amount` > 10;"},
		{Kind: chain.ObjectView, Schema: db, Name: "a_top", Definer: definer,
			Definition: "CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `a_top` AS select `z_big`.`id` AS `id`,`doubled`(`z_big`.`amount`) AS `twice` from `z_big`;"},
		{Kind: chain.ObjectTrigger, Schema: db, Name: "orders_audit", Table: db + ".orders", Definer: definer,
			Definition: testMode + "CREATE TRIGGER orders_audit AFTER INSERT ON orders FOR EACH ROW INSERT INTO audit (order_id) VALUES (NEW.id);"},
		{Kind: chain.ObjectEvent, Schema: db, Name: "purge_audit", Definer: definer,
			Definition: testMode + "SET time_zone = 'SYSTEM';\nCREATE EVENT `purge_audit` ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' ON COMPLETION NOT PRESERVE ENABLE DO DELETE FROM audit WHERE id < 0;"},
		{Kind: chain.ObjectComment, Schema: db, Name: "table orders", Table: db + ".orders",
			Definition: "ALTER TABLE `orders` COMMENT = 'the shop''s orders \\\\ all';"},
	}
}

// objectsTarget is a target with the shop's two tables.
func objectsTarget(t *testing.T) (*Target, string) {
	t.Helper()
	tg := openTarget(t)
	exec(t, tg, "CREATE TABLE orders (id int PRIMARY KEY AUTO_INCREMENT, amount int NOT NULL)",
		"CREATE TABLE audit (id int PRIMARY KEY AUTO_INCREMENT, order_id int NOT NULL)")
	var user string
	if err := tg.db.QueryRow("SELECT CURRENT_USER()").Scan(&user); err != nil {
		t.Fatal(err)
	}
	return tg, user
}

func showCreateText(t *testing.T, db *sql.DB, what string, col int) string {
	t.Helper()
	rows, err := db.Query("SHOW CREATE " + what)
	if err != nil {
		t.Fatalf("SHOW CREATE %s: %v", what, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if !rows.Next() {
		t.Fatalf("SHOW CREATE %s: no row", what)
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	return vals[col].String
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestApplyObjectsCreatesReplacesAndDrops(t *testing.T) {
	ctx := context.Background()
	tg, user := objectsTarget(t)
	objs := shopObjects("shop", user)
	r, err := tg.ApplyObjects(ctx, nil, objs, target.ObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(target.Summary(r.Created), ", "); got != "comment 1, event 1, function 1, procedure 1, trigger 1, view 2" || len(r.Skipped) != 0 {
		t.Fatalf("created %s, skipped %q", got, r.Skipped)
	}
	app := testenv.MySQL(t, tg.schema) // an application's session
	wantRows(t, app, "SELECT twice FROM a_top")
	if _, err := app.Exec("INSERT INTO orders (amount) VALUES (20)"); err != nil {
		t.Fatal(err)
	}
	wantRows(t, app, "SELECT id, twice FROM a_top", "1|40")
	if c := showCreateText(t, app, "TABLE orders", 1); !strings.Contains(c, `COMMENT='the shop''s orders \\ all'`) {
		t.Fatalf("table comment: %s", c)
	}
	var status, definer string
	if err := app.QueryRow("SELECT STATUS, DEFINER FROM information_schema.EVENTS WHERE EVENT_SCHEMA = DATABASE() AND EVENT_NAME = 'purge_audit'").Scan(&status, &definer); err != nil {
		t.Fatal(err)
	}
	if status != "SLAVESIDE_DISABLED" || definer != user {
		t.Fatalf("event status %s, definer %s", status, definer)
	}
	if p := showCreateText(t, app, "PROCEDURE place", 2); !strings.Contains(p, "CREATE DEFINER=`") || !strings.Contains(p, "SELECT COUNT(*) FROM orders; END") {
		t.Fatalf("procedure %s", p)
	}

	// The trigger fires for the application's sessions, never for
	// sluice's own (a replicated row whose audit row the chain carries).
	if n := count(t, app, "SELECT COUNT(*) FROM audit"); n != 1 {
		t.Fatalf("%d audit rows after the application's insert", n)
	}
	if _, err := tg.db.Exec("INSERT INTO orders (amount) VALUES (30)"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, app, "SELECT COUNT(*) FROM audit"); n != 1 {
		t.Fatalf("%d audit rows after a sluice session's insert: the trigger fired", n)
	}

	// Run again (a crash before the position committed): it converges.
	if _, err := tg.ApplyObjects(ctx, nil, objs, target.ObjectOptions{}); err != nil {
		t.Fatalf("second run: %v", err)
	}
	wantRows(t, app, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()", "1")

	// The source adds a view, alters the function and drops the trigger
	// and the comment.
	next := append([]chain.Object(nil), objs[:4]...)
	next[0].Definition = strings.Replace(next[0].Definition, "RETURN x * 2", "RETURN x * 3", 1)
	next = append(next, objs[5], chain.Object{Kind: chain.ObjectView, Schema: "shop", Name: "small", Definer: user,
		Definition: "CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `small` AS select `orders`.`id` AS `id` from `orders` where `orders`.`amount` <= 10;"})
	r, err = tg.ApplyObjects(ctx, objs, next, target.ObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, rp, d := strings.Join(target.Summary(r.Created), ", "), strings.Join(target.Summary(r.Replaced), ", "), strings.Join(target.Summary(r.Dropped), ", "); c != "view 1" || rp != "function 1" || d != "comment 1, trigger 1" {
		t.Fatalf("created %s, replaced %s, dropped %s", c, rp, d)
	}
	wantRows(t, app, "SELECT id, twice FROM a_top ORDER BY id", "1|60", "2|90")
	wantRows(t, app, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()", "0")
	wantRows(t, app, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders'", "")
	// Again: the same move converges.
	if _, err := tg.ApplyObjects(ctx, objs, next, target.ObjectOptions{}); err != nil {
		t.Fatalf("the move run again: %v", err)
	}
}

func TestApplyObjectsDefiners(t *testing.T) {
	ctx := context.Background()
	tg, user := objectsTarget(t)
	objs := shopObjects("shop", "ghost@%")
	objs[1].Definer = user
	_, err := tg.ApplyObjects(ctx, nil, objs, target.ObjectOptions{})
	wantCode(t, err, errcode.TargetDefinerMissing)
	if !strings.Contains(err.Error(), "ghost@%") || errcode.ExitStatus(err) != 3 {
		t.Fatalf("refusal %v (exit %d)", err, errcode.ExitStatus(err))
	}
	app := testenv.MySQL(t, tg.schema)
	wantRows(t, app, "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()", "0")

	_, err = tg.ApplyObjects(ctx, nil, objs, target.ObjectOptions{Definer: "nobody@nowhere"})
	wantCode(t, err, errcode.TargetDefinerMissing)

	// An operator's definer replaces every recorded one.
	if _, err := tg.ApplyObjects(ctx, nil, objs, target.ObjectOptions{Definer: "CURRENT_USER"}); err != nil {
		t.Fatal(err)
	}
	wantRows(t, app, "SELECT DISTINCT DEFINER FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE()", user)
	u, h, _ := strings.Cut(user, "@")
	if _, err := tg.ApplyObjects(ctx, nil, objs, target.ObjectOptions{Definer: "'" + u + "'@'" + h + "'"}); err != nil {
		t.Fatal(err)
	}
	wantRows(t, app, "SELECT DISTINCT DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()", user)
}

func TestApplyObjectsRefusesForeignTexts(t *testing.T) {
	ctx := context.Background()
	tg, user := objectsTarget(t)
	app := testenv.MySQL(t, tg.schema)
	for _, ob := range []chain.Object{
		{Kind: chain.ObjectView, Name: "v", Definer: user, Definition: "CREATE VIEW `other` AS select 1;"},
		{Kind: chain.ObjectView, Name: "v", Definer: user, Definition: "CREATE VIEW `elsewhere`.`v` AS select 1;"},
		{Kind: chain.ObjectView, Name: "v", Definer: user, Definition: "DROP TABLE orders;"},
		{Kind: chain.ObjectFunction, Name: "f", Definer: user, Definition: "SET sql_mode = 'ANSI'; DROP TABLE orders; SELECT '';\nCREATE FUNCTION `f`() RETURNS int RETURN 1;"},
		{Kind: chain.ObjectEvent, Name: "e", Definer: user, Definition: "SET time_zone = 'x'';DROP TABLE orders;';\nCREATE EVENT `e` ON SCHEDULE EVERY 1 DAY ON COMPLETION NOT PRESERVE ENABLE DO SELECT 1;"},
		{Kind: chain.ObjectTrigger, Name: "tr", Table: "shop.orders", Definer: user, Definition: "CREATE TRIGGER tr AFTER INSERT ON audit FOR EACH ROW SET @a = 1;"},
		{Kind: chain.ObjectComment, Name: "table orders", Table: "shop.orders", Definition: "ALTER TABLE `orders` COMMENT = 'x', DROP COLUMN amount;"},
	} {
		_, err := tg.ApplyObjects(ctx, nil, []chain.Object{ob}, target.ObjectOptions{})
		if !errcode.Is(err, errcode.ChainSchemaRefused) {
			t.Errorf("%s %q: %v", ob.Kind, ob.Definition, err)
		}
	}
	// A second statement hidden in a body never runs: the connection takes
	// one statement a call.
	_, err := tg.ApplyObjects(ctx, nil, []chain.Object{{Kind: chain.ObjectFunction, Name: "f", Definer: user,
		Definition: "CREATE FUNCTION `f`() RETURNS int RETURN 1; DROP TABLE orders;"}}, target.ObjectOptions{})
	if err == nil {
		t.Fatal("a function text with a second statement was run")
	}
	wantRows(t, app, "SELECT COUNT(*) FROM orders", "0")

	// Kinds of another engine are skipped and said so; a trigger on a
	// table the target lacks is skipped too.
	r, err := tg.ApplyObjects(ctx, nil, []chain.Object{
		{Kind: chain.ObjectPolicy, Schema: "public", Name: "p", Table: "public.t", Definition: "CREATE POLICY p ON public.t USING (true);"},
		{Kind: chain.ObjectTrigger, Schema: "shop", Name: "gone_audit", Table: "shop.gone", Definer: user,
			Definition: testMode + "CREATE TRIGGER gone_audit AFTER INSERT ON gone FOR EACH ROW SET @a = 1;"},
	}, target.ObjectOptions{})
	if err != nil || len(r.Skipped) != 2 || len(r.Created) != 0 {
		t.Fatalf("result %+v, %v", r, err)
	}
}
