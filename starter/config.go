package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/config"
)

// bindConfig registers --config and loads the file before any command runs.
func (c *cli) bindConfig(root *cobra.Command) {
	root.PersistentFlags().StringVar(&c.configPath, "config", "",
		"configuration file (env "+config.EnvPath+"); flags and environment variables override it")
	root.PersistentFlags().StringVar(&c.site, config.SiteFlag, os.Getenv(config.SiteEnv),
		"a [sites.NAME] table of the configuration file: its namespace and task queue, unless --namespace / --task-queue are given (env "+config.SiteEnv+")")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return c.loadConfig(cmd) }
}

// loadConfig reads the configuration file, if one is named, lets it fill the
// flags that neither the command line nor the environment set, and resolves
// --source @NAME / --target @NAME. It is the only place the file meets flags.
func (c *cli) loadConfig(cmd *cobra.Command) error {
	if cmd.Name() == "help" || strings.HasPrefix(cmd.Name(), "__complete") || isVersionCmd(cmd) {
		return nil
	}
	path := c.configPath
	if path == "" {
		path = os.Getenv(config.EnvPath)
	}
	if path != "" {
		f, err := config.Load(path)
		if err != nil {
			return err
		}
		c.config = f
	}
	settings, err := config.Apply(cmd.Flags(), c.config, os.Getenv)
	if err != nil {
		return err
	}
	c.settings = settings
	if c.site != "" {
		site, err := c.config.Site(c.site)
		if err != nil {
			return err
		}
		if err := site.UseSite(cmd.Flags()); err != nil {
			return err
		}
	}
	if err := c.setupTracing(cmd.Context()); err != nil {
		return err
	}
	return c.useConnections(cmd)
}

// namedFlags are the flags that describe one database; a value "@NAME" of the
// DSN flag names a connection of the file.
var namedFlags = []struct {
	dsn, passwordEnv, passwordFile, driver string
	kind                                   config.Kind
}{
	{"source", "source-password-env", "source-password-file", "source-driver", config.Sources},
	{"target", "target-password-env", "target-password-file", "target-driver", config.Targets},
}

// useConnections replaces --source @NAME / --target @NAME with the named
// connection's DSN and, unless a password flag was given, its reference.
func (c *cli) useConnections(cmd *cobra.Command) error {
	fs := cmd.Flags()
	for _, n := range namedFlags {
		fl := fs.Lookup(n.dsn)
		if fl == nil || !strings.HasPrefix(fl.Value.String(), "@") {
			continue
		}
		if fs.Lookup(n.passwordEnv) == nil {
			return usageError("--%s %s: named connections are databases, and --%s of this command is a backup store URL", n.dsn, fl.Value.String(), n.dsn)
		}
		conn, err := c.config.Connection(n.kind, strings.TrimPrefix(fl.Value.String(), "@"))
		if err != nil {
			return err
		}
		if err := fl.Value.Set(conn.DSN); err != nil {
			return err
		}
		if !fs.Changed(n.passwordEnv) && !fs.Changed(n.passwordFile) {
			if err := fs.Lookup(n.passwordEnv).Value.Set(conn.Password.Env); err != nil {
				return err
			}
			if err := fs.Lookup(n.passwordFile).Value.Set(conn.Password.File); err != nil {
				return err
			}
		}
		if d := fs.Lookup(n.driver); d != nil && !d.Changed {
			if err := d.Value.Set(conn.Driver); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *cli) validateConfigCmd() *cobra.Command {
	var printJSON bool
	cmd := &cobra.Command{
		Use:   "validate-config",
		Short: "Check the configuration file without starting anything; --print-json shows it resolved, secrets as references",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if c.config == nil {
				return usageError("validate-config needs a file: give --config PATH or set %s", config.EnvPath)
			}
			if !printJSON {
				fmt.Fprintf(c.stdout, "%s is valid; sources: %s; targets: %s\n", c.config.Path, names(c.config.Sources), names(c.config.Targets))
				return nil
			}
			b, err := json.MarshalIndent(config.NewView(c.config, c.settings), "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, string(b))
			return nil
		},
	}
	cmd.Flags().BoolVar(&printJSON, "print-json", false, "print the resolved configuration as JSON (passwords as references, never values)")
	return cmd
}

// names lists connection names as --source / --target take them.
func names(conns map[string]config.Connection) string {
	if len(conns) == 0 {
		return "none"
	}
	out := make([]string, 0, len(conns))
	for n := range conns {
		out = append(out, "@"+n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
