package main

import (
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/buildinfo"
	"github.com/sluicehq/sluice/internal/errcode"
)

// printVersion writes what `sluice-worker version` and `--version` show.
func printVersion(w io.Writer) int {
	if err := buildinfo.Read().Write(w, "sluice-worker"); err != nil {
		fmt.Fprintf(w, "sluice-worker: %v\n", err)
		return errcode.ExitRuntime
	}
	return errcode.ExitOK
}
