package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/errcode"
)

// registry records what a worker would register.
type registry struct {
	worker.Registry
	workflows, activities []string
}

func (r *registry) RegisterWorkflow(w any) { r.workflows = append(r.workflows, name(w)) }

func (r *registry) RegisterWorkflowWithOptions(w any, o workflow.RegisterOptions) {
	r.workflows = append(r.workflows, o.Name)
}

func (r *registry) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	if reflect.ValueOf(a).Kind() != reflect.Func {
		panic("RegisterActivityWithOptions of a non-function")
	}
	r.activities = append(r.activities, o.Name)
}

// registered returns what RegisterRoles registers for roles, sorted.
func registered(roles ...Role) (workflows, acts []string) {
	var r registry
	RegisterRoles(&r, &activities.Activities{}, roles)
	sort.Strings(r.workflows)
	sort.Strings(r.activities)
	return r.workflows, r.activities
}

// Every role together registers every workflow and every activity method,
// each once: a worker of all roles is the worker of before roles existed.
func TestAllRolesRegisterEverything(t *testing.T) {
	wfs, acts := registered(Roles...)
	want := []string{"BrokerWorkflow", "CompactWorkflow", "CutoverWorkflow", "FullBackupWorkflow", "IncrementalWorkflow", "ProducerWorkflow", "RestoreWorkflow", "RotateWorkflow", "VerifyWorkflow"}
	if !slices.Equal(wfs, want) {
		t.Errorf("all roles register workflows %v, want %v", wfs, want)
	}
	var methods []string
	typ := reflect.TypeOf(&activities.Activities{})
	for i := range typ.NumMethod() {
		methods = append(methods, typ.Method(i).Name)
	}
	if !slices.Equal(acts, methods) {
		t.Errorf("all roles register activities %v, want every method of activities.Activities %v", acts, methods)
	}
}

// A role's workflows schedule only activities the role registers, and start
// only child workflows it registers: read off the package's source, from
// each workflow function through every function of the package it calls.
func TestEachRoleHostsWhatItsWorkflowsRun(t *testing.T) {
	refs := packageReferences(t)
	for _, role := range Roles {
		wfs, acts := registered(role)
		seen := map[string]bool{}
		var walk func(fn string)
		walk = func(fn string) {
			if seen[fn] {
				return
			}
			seen[fn] = true
			for _, r := range refs[fn] {
				if strings.HasPrefix(r, "a.") {
					if act := strings.TrimPrefix(r, "a."); !slices.Contains(acts, act) {
						t.Errorf("role %s: %s schedules activity %s, which the role does not register", role, fn, act)
					}
					continue
				}
				if strings.HasSuffix(r, "Workflow") && r != fn && !slices.Contains(wfs, r) {
					t.Errorf("role %s: %s starts workflow %s, which the role does not register", role, fn, r)
				}
				walk(r)
			}
		}
		for _, wf := range wfs {
			walk(wf)
		}
		// And nothing registered goes unused by the role's workflows.
		for _, act := range acts {
			used := false
			for fn := range seen {
				used = used || slices.Contains(refs[fn], "a."+act)
			}
			if !used {
				t.Errorf("role %s registers activity %s, which none of its workflows schedules", role, act)
			}
		}
	}
}

// packageReferences maps each top-level function and method of the
// package's non-test files to the package functions it names and the
// activities it names as a.Method.
func packageReferences(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	decls := map[string]*ast.FuncDecl{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "register.go" {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				decls[fd.Name.Name] = fd
			}
		}
	}
	refs := map[string][]string{}
	for n, fd := range decls {
		ast.Inspect(fd, func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "a" {
					refs[n] = append(refs[n], "a."+x.Sel.Name)
				}
				// A method call on a value of the package's own types.
				if _, ok := decls[x.Sel.Name]; ok {
					refs[n] = append(refs[n], x.Sel.Name)
				}
			case *ast.Ident:
				if _, ok := decls[x.Name]; ok && x.Name != n {
					refs[n] = append(refs[n], x.Name)
				}
			}
			return true
		})
	}
	return refs
}

// --roles takes a comma-separated list of known roles; empty is all.
func TestParseRoles(t *testing.T) {
	if got, err := ParseRoles(""); err != nil || !slices.Equal(got, Roles) {
		t.Errorf("empty: %v, %v; want every role", got, err)
	}
	if got, err := ParseRoles(" broker , restore"); err != nil || !slices.Equal(got, []Role{RoleBroker, RoleRestore}) {
		t.Errorf("broker,restore: %v, %v", got, err)
	}
	for _, bad := range []string{"brokers", "producer,producer", "producer,,broker"} {
		_, err := ParseRoles(bad)
		if e, ok := errcode.As(err); !ok || e.Code != errcode.Usage || !strings.Contains(err.Error(), "producer,broker,restore,maintenance") && !strings.Contains(err.Error(), "twice") {
			t.Errorf("%q: %v, want SLUICE-E-USAGE naming the roles", bad, err)
		}
	}
}
