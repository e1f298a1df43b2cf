package main

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func hello(workflow.Context) (string, error) { return "hello", nil }

// run executes hello as workflow id on a test worker with the hook set to value.
func runWithHook(t *testing.T, value, id string) (string, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: testHookInterceptors(value)})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.ExecuteWorkflow(hello)
	if err := env.GetWorkflowError(); err != nil {
		return "", err
	}
	var out string
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return out, nil
}

func TestPanicHook(t *testing.T) {
	if _, err := runWithHook(t, " broker/a ,broker/stuck", "broker/stuck"); err == nil ||
		!strings.Contains(err.Error(), testPanicMessage) || !strings.Contains(err.Error(), "broker/stuck") {
		t.Fatalf("a named workflow panics with the hook's message, got %v", err)
	}
	for value, id := range map[string]string{
		"broker/stuck": "broker/other", // another workflow on the same worker
		"":             "broker/stuck", // the variable unset
		" , ":          "broker/stuck", // nothing named
	} {
		if out, err := runWithHook(t, value, id); err != nil || out != "hello" {
			t.Errorf("hook %q, workflow %s: want it to run untouched, got %q, %v", value, id, out, err)
		}
	}
	if testHookInterceptors("") != nil || testHookInterceptors(" , ") != nil {
		t.Fatal("an unset hook installs no interceptor")
	}
}
