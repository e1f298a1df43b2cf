package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

// versionCmd prints what the binary was built from: module version, VCS
// commit and time, and the Go release. It needs neither Temporal nor a store.
func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build's module version, VCS commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return buildinfo.Read().Write(c.stdout, "sluice")
		},
	}
}

// setVersion gives the root command a --version flag printing the same text
// as `sluice version`.
func setVersion(root *cobra.Command) {
	in := buildinfo.Read()
	var b strings.Builder
	_ = in.Write(&b, "sluice")
	root.Version = in.Version
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations["buildinfo"] = b.String()
	root.SetVersionTemplate(`{{index .Annotations "buildinfo"}}`)
}

// isVersionCmd tells `sluice version` apart: it reads no configuration file,
// so it answers even where the file is missing or broken.
func isVersionCmd(cmd *cobra.Command) bool {
	return cmd.Name() == "version" && cmd.Parent() == cmd.Root()
}
