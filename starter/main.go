// Command sluice is the operator's CLI: it starts sluice's Temporal workflows,
// follows them with live progress, and ends with an exit status that says how
// they ended (0 done, 1 runtime failure, 2 bad usage, 3 a named refusal).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newCLI(os.Stdout, os.Stderr).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
