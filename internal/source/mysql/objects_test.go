package mysql

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// objectsSchema is a small application: a view on a view whose names sort
// the wrong way round, a function and a procedure, an audit trigger, an
// event and a table comment.
const objectsSchema = `CREATE TABLE orders (id int PRIMARY KEY AUTO_INCREMENT, amount int NOT NULL) COMMENT = 'the shop''s orders \\ all of them';
CREATE TABLE audit (id int PRIMARY KEY AUTO_INCREMENT, order_id int NOT NULL);
CREATE TABLE other (id int PRIMARY KEY);
CREATE FUNCTION doubled(x int) RETURNS int DETERMINISTIC RETURN x * 2;
CREATE PROCEDURE place(IN n int) BEGIN INSERT INTO orders (amount) VALUES (n); SELECT COUNT(*) FROM orders; END;
CREATE VIEW z_big AS SELECT id, amount FROM orders WHERE amount > 10;
CREATE VIEW a_top AS SELECT id, doubled(amount) AS twice FROM z_big;
CREATE TRIGGER orders_audit AFTER INSERT ON orders FOR EACH ROW INSERT INTO audit (order_id) VALUES (NEW.id);
CREATE TRIGGER other_audit AFTER INSERT ON other FOR EACH ROW INSERT INTO audit (order_id) VALUES (NEW.id);
CREATE EVENT purge_audit ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' DO DELETE FROM audit WHERE id < 0`

func currentUser(t *testing.T, f *fixture) string {
	t.Helper()
	var u string
	if err := testenv.MySQL(t, f.db).QueryRow("SELECT CURRENT_USER()").Scan(&u); err != nil {
		t.Fatal(err)
	}
	return u
}

func objectKeys(objs []chain.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = string(o.Kind) + " " + o.Name
	}
	return out
}

func TestFullRecordsObjectsInDependencyOrder(t *testing.T) {
	f := newFixture(t, objectsSchema)
	m := f.full(source.FullOptions{})
	objs := m.Schema.Objects
	want := []string{"function doubled", "procedure place", "view z_big", "view a_top", "trigger orders_audit", "trigger other_audit",
		"event purge_audit", "comment table orders"}
	if got := objectKeys(objs); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("objects:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	user := currentUser(t, f)
	for _, o := range objs {
		if o.Schema != f.db {
			t.Errorf("%s %s: schema %q", o.Kind, o.Name, o.Schema)
		}
		if strings.Contains(o.Definition, f.db) {
			t.Errorf("%s %s names the source database: %s", o.Kind, o.Name, o.Definition)
		}
		if o.Kind == chain.ObjectComment {
			continue
		}
		if o.Definer != user {
			t.Errorf("%s %s: definer %q, want %q", o.Kind, o.Name, o.Definer, user)
		}
		if strings.Contains(o.Definition, "DEFINER=") || strings.Contains(o.Definition, "DEFINER =") {
			t.Errorf("%s %s keeps its definer in the text: %s", o.Kind, o.Name, o.Definition)
		}
	}
	byName := map[string]chain.Object{}
	for _, o := range objs {
		byName[o.Name] = o
	}
	if d := byName["place"].Definition; !strings.HasPrefix(d, "SET sql_mode = '") || !strings.Contains(d, "\nCREATE PROCEDURE `place`(IN n int)") ||
		!strings.HasSuffix(d, "SELECT COUNT(*) FROM orders; END;") {
		t.Errorf("procedure definition %q", d)
	}
	if d := byName["purge_audit"].Definition; !strings.Contains(d, "SET time_zone = '") || !strings.Contains(d, "ENABLE DO DELETE FROM audit") {
		t.Errorf("event definition %q", d)
	}
	if d := byName["orders_audit"].Definition; !strings.Contains(d, "\nCREATE TRIGGER orders_audit AFTER INSERT ON orders FOR EACH ROW INSERT INTO audit") {
		t.Errorf("trigger definition %q", d)
	}
	if d, o := byName["table orders"].Definition, byName["table orders"]; d != "ALTER TABLE `orders` COMMENT = 'the shop''s orders \\\\ all of them';" || o.Table != f.db+".orders" {
		t.Errorf("comment %+v", o)
	}
	if d := byName["a_top"].Definition; !strings.HasPrefix(d, "CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `a_top` AS select") {
		t.Errorf("view definition %q", d)
	}

	// A filter leaves out the triggers and comments of the tables it does
	// not take; views and routines are recorded all the same.
	f2 := newFixture(t, objectsSchema)
	fl, err := filter.Compile(filter.Spec{ExcludeTables: []string{f2.db + ".other", f2.db + ".orders"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m2 := f2.full(source.FullOptions{Filter: fl})
	want2 := []string{"function doubled", "procedure place", "view z_big", "view a_top", "event purge_audit"}
	if got := objectKeys(m2.Schema.Objects); strings.Join(got, ", ") != strings.Join(want2, ", ") {
		t.Fatalf("filtered objects:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want2, ", "))
	}
}

func TestDefinerTakenOut(t *testing.T) {
	for _, tc := range []struct{ in, def, definer string }{
		{"CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v` AS select 1", "CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `v` AS select 1", "root@localhost"},
		{"CREATE DEFINER=`a``b`@`%` FUNCTION `f`() RETURNS int RETURN 1", "CREATE FUNCTION `f`() RETURNS int RETURN 1", "a`b@%"},
		{"CREATE DEFINER=`app_role` PROCEDURE `p`() SELECT 1", "CREATE PROCEDURE `p`() SELECT 1", "app_role"},
		{"CREATE TRIGGER t BEFORE INSERT ON x FOR EACH ROW SET @DEFINER=1", "CREATE TRIGGER t BEFORE INSERT ON x FOR EACH ROW SET @DEFINER=1", ""},
		{"CREATE FUNCTION `f`() RETURNS int RETURN (SELECT 1 FROM x WHERE DEFINER = 'a')", "CREATE FUNCTION `f`() RETURNS int RETURN (SELECT 1 FROM x WHERE DEFINER = 'a')", ""},
	} {
		def, definer := takeDefiner(tc.in)
		if def != tc.def || definer != tc.definer {
			t.Errorf("takeDefiner(%q) = %q, %q; want %q, %q", tc.in, def, definer, tc.def, tc.definer)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"CREATE TRIGGER `shop`.`t` AFTER INSERT ON `shop`.`x` FOR EACH ROW SET @a = 1", "CREATE TRIGGER `t` AFTER INSERT ON `x` FOR EACH ROW SET @a = 1"},
		{"CREATE TRIGGER shop.t AFTER INSERT ON x FOR EACH ROW SET @a = 1", "CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW SET @a = 1"},
		{"CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW SET @a = 'shop.'", "CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW SET @a = 'shop.'"},
	} {
		if got := unqualifyTrigger(tc.in, "shop"); got != tc.want {
			t.Errorf("unqualifyTrigger(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCaptureRecordsObjectsChangedByStatements(t *testing.T) {
	f := newFixture(t, objectsSchema)
	m := f.full(source.FullOptions{})
	// Object statements alone, with no row written: the window still
	// delivers a transaction (each statement's, empty), so it commits an
	// incremental carrying the new objects.
	f.exec("CREATE VIEW small AS SELECT id FROM orders WHERE amount <= 10;\n" +
		"CREATE OR REPLACE FUNCTION doubled(x int) RETURNS int DETERMINISTIC RETURN x + x")
	changes, win, all := f.capture(m.EndPosition, m.Schema)
	if len(changes) != 0 || win.Transactions == 0 || win.Schema == nil {
		t.Fatalf("window %+v, changes %q", win, changes)
	}
	for _, c := range all {
		if c.Op != chain.OpBegin && c.Op != chain.OpCommit || !c.Identified || c.Tx == "" {
			t.Fatalf("an object statement delivered %+v", c)
		}
	}
	got := map[string]chain.Object{}
	for _, o := range win.Schema.Objects {
		got[o.Name] = o
	}
	if _, ok := got["small"]; !ok || !strings.Contains(got["doubled"].Definition, "RETURN x + x") || len(win.Schema.Tables) != 3 {
		t.Fatalf("window schema objects %q, tables %d", objectKeys(win.Schema.Objects), len(win.Schema.Tables))
	}

	// Rows around an object statement are captured as before, and a table
	// change keeps the objects in the schema it records.
	f.exec("INSERT INTO orders (amount) VALUES (50);\n" +
		"DROP TRIGGER other_audit;\n" +
		"ALTER TABLE orders ADD COLUMN note varchar(10);\n" +
		"INSERT INTO orders (amount, note) VALUES (5, 'x')")
	changes, win, _ = f.capture(win.End, win.Schema)
	inserts := 0
	for _, c := range changes {
		if strings.HasPrefix(c, "I ") {
			inserts++
		}
	}
	if inserts != 4 { // two orders and their two audit rows
		t.Fatalf("changes %q", changes)
	}
	if win.Schema == nil {
		t.Fatal("no schema after a table change")
	}
	keys := strings.Join(objectKeys(win.Schema.Objects), ", ")
	if strings.Contains(keys, "other_audit") || !strings.Contains(keys, "view small") || !strings.Contains(keys, "trigger orders_audit") {
		t.Fatalf("objects after the drop: %s", keys)
	}

	// A statement that changes nothing recorded leaves the schema alone.
	f.exec("CREATE TABLE scratch (id int PRIMARY KEY);\nDROP TABLE scratch")
	changes, win, _ = f.capture(win.End, win.Schema)
	if len(changes) != 0 || win.Schema != nil {
		t.Fatalf("an unrelated statement: changes %q, schema %+v", changes, win.Schema)
	}
}
