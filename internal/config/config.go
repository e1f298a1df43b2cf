// Package config reads sluice's configuration file: defaults for the Temporal
// connection and the backup store, and named database connections whose
// passwords are only ever references (an environment variable or a file).
//
// The file is TOML. Loading is strict: a key sluice does not know, a password
// written in clear and a value of the wrong type are refused with coded errors
// that name the key's full path. Flags and environment variables override the
// file (see Apply); docs/configuration.md describes the format.
package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
)

// EnvPath names the environment variable that gives the file's path when
// --config is not set.
const EnvPath = "SLUICE_CONFIG"

// DefaultDriver is the engine of a connection that names none.
const DefaultDriver = "postgres"

// KnownDrivers lists the engines a connection of a kind may name (driver
// names and their aliases). The CLI sets it from the engine registries; the
// package itself knows only DefaultDriver.
var KnownDrivers = func(Kind) []string { return []string{DefaultDriver} }

// Kind selects the table a named connection lives in.
type Kind string

// The two tables of named connections.
const (
	Sources Kind = "sources"
	Targets Kind = "targets"
)

// File is a loaded and validated configuration file. An empty string means
// the file leaves that setting to the environment or the built-in default.
type File struct {
	// Path is where the file was read from.
	Path string
	// Temporal holds defaults for reaching Temporal.
	Temporal Temporal
	// Store holds defaults for opening s3:// backup stores.
	Store Store
	// Worker holds sluice-worker's own settings.
	Worker Worker
	// Sources are the named source databases (--source @NAME).
	Sources map[string]Connection
	// Targets are the named target databases (--target @NAME).
	Targets map[string]Connection
	// Sites are the named sites of a deployment (--site NAME).
	Sites map[string]Site
}

// Site is one [sites.NAME] table: where a site's runs live in Temporal and
// what its worker hosts, so that commands and the worker of the site name it
// once (--site NAME) rather than repeating --namespace and --task-queue.
type Site struct {
	// Namespace and TaskQueue are the site's --namespace and --task-queue
	// (empty: not set by the site).
	Namespace string
	TaskQueue string
	// Roles is the site worker's --roles (empty: not set by the site).
	Roles string
}

// Temporal is the [temporal] table.
type Temporal struct {
	Address   string
	Namespace string
	TaskQueue string
	// TLS is nil when the file does not set tls.
	TLS           *bool
	TLSCA         string
	TLSCert       string
	TLSKey        string
	TLSServerName string
	// APIKeyEnv and PayloadKeyEnv name environment variables; the file never
	// holds the API key or the payload key themselves.
	APIKeyEnv     string
	PayloadKeyEnv string
}

// DefaultRoles is sluice-worker's --roles when nothing sets it: every role
// (workflows.Roles).
const DefaultRoles = "producer,broker,restore,maintenance"

// Worker is the [worker] table: the admin endpoint of sluice-worker and
// where its trace spans go. The token is only ever a reference (an
// environment variable or a file).
type Worker struct {
	AdminAddr      string
	AdminTokenEnv  string
	AdminTokenFile string
	AdminTLSCert   string
	AdminTLSKey    string
	// OTLPEndpoint is the OTLP/HTTP collector of --otlp-endpoint. The
	// sluice CLI reads it too, so the span of a command that starts a
	// workflow joins the worker's trace.
	OTLPEndpoint string
	// Roles is the worker's --roles: a comma-separated list of the parts
	// of sluice it hosts (empty: all).
	Roles string
}

// Store is the [store] table.
type Store struct {
	Endpoint string
	Region   string
	// PathStyle is nil when the file does not set path_style.
	PathStyle *bool
}

// Connection is one [sources.NAME] or [targets.NAME] table.
type Connection struct {
	// Driver is the database engine; DefaultDriver when the file names none.
	Driver string
	// DSN is the connection string, never with a password in it.
	DSN string
	// Password says where the worker finds the password; zero means nowhere
	// (libpq's PGPASSWORD and .pgpass then apply).
	Password SecretRef
}

// SecretRef points at a secret without holding it: exactly one of Env and
// File is set, or neither.
type SecretRef struct {
	// Env names an environment variable of the worker.
	Env string
	// File is a path on the worker's host.
	File string
}

// IsZero reports whether the reference points nowhere.
func (r SecretRef) IsZero() bool { return r.Env == "" && r.File == "" }

// Ref returns the connection as the DSN reference workflows carry.
func (c Connection) Ref() credentials.DSNRef {
	return credentials.DSNRef{DSN: c.DSN, PasswordEnv: c.Password.Env, PasswordFile: c.Password.File}
}

// Load reads and validates the file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigFileUnreadable, err, "configuration file")
	}
	return Parse(path, data)
}

// Connection returns the named connection of kind. f may be nil (no file
// loaded), which names no connection.
func (f *File) Connection(kind Kind, name string) (Connection, error) {
	if f == nil {
		return Connection{}, errcode.New(errcode.ConfigConnectionUnknown,
			"@%s names a connection of %s, but no configuration file is loaded (--config or %s)", name, kind, EnvPath)
	}
	conns := f.connections(kind)
	if c, ok := conns[name]; ok {
		return c, nil
	}
	return Connection{}, errcode.New(errcode.ConfigConnectionUnknown, "%s defines no %s.%s (%s)", f.Path, kind, name, defines(conns, "@"))
}

// connections returns the file's connections of kind.
func (f *File) connections(kind Kind) map[string]Connection {
	if kind == Targets {
		return f.Targets
	}
	return f.Sources
}

// defines says which names a table of named tables holds, each after
// prefix, in name order: "it defines @a, @b" or "it defines none".
func defines[T any](m map[string]T, prefix string) string {
	names := sortedNames(m)
	if len(names) == 0 {
		return "it defines none"
	}
	for i, n := range names {
		names[i] = prefix + n
	}
	return "it defines " + strings.Join(names, ", ")
}

// sortedNames returns m's keys in order.
func sortedNames[T any](m map[string]T) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UnresolvedPasswords checks, in the worker that will resolve them, the
// password references of the file's connections of kind: it returns the
// first that does not resolve (its environment variable unset, its file
// unreadable) as SLUICE-E-SECRET-UNRESOLVED naming the connection and the
// reference, or nil when all do. who says what needs them ("role
// producer"). Connections are checked in name order.
func (f *File) UnresolvedPasswords(kind Kind, who string) error {
	if f == nil {
		return nil
	}
	conns := f.connections(kind)
	for _, n := range sortedNames(conns) {
		// The worker's own resolution, as its activities will run it.
		if _, err := conns[n].Ref().Resolve(); err != nil {
			return fmt.Errorf("%s needs the password of %s.%s (%s): %w", who, kind, n, f.Path, err)
		}
	}
	return nil
}

// Site returns the named site. f may be nil (no file loaded), which names
// no site.
func (f *File) Site(name string) (Site, error) {
	if f == nil {
		return Site{}, errcode.New(errcode.ConfigSiteUnknown,
			"--site %s names a site of the configuration file, but none is loaded (--config or %s)", name, EnvPath)
	}
	if s, ok := f.Sites[name]; ok {
		return s, nil
	}
	return Site{}, errcode.New(errcode.ConfigSiteUnknown, "--site %s: %s defines no sites.%s (%s)", name, f.Path, name, defines(f.Sites, ""))
}

// SiteFlag is the flag (and SiteEnv its variable) that picks a site of the
// file for a command or a worker.
const (
	SiteFlag = "site"
	SiteEnv  = "SLUICE_SITE"
)

// UseSite fills the flags of fs the site sets (--namespace, --task-queue,
// and --roles where fs has it) unless the command line gave them: a site
// counts above the environment and the [temporal] table, below a flag.
func (s Site) UseSite(fs *pflag.FlagSet) error {
	for _, kv := range []struct{ flag, value string }{
		{"namespace", s.Namespace}, {"task-queue", s.TaskQueue}, {"roles", s.Roles},
	} {
		fl := fs.Lookup(kv.flag)
		if fl == nil || kv.value == "" || fl.Changed {
			continue
		}
		if err := fl.Value.Set(kv.value); err != nil {
			return errcode.Wrap(errcode.ConfigInvalid, err, "--%s from the site", kv.flag)
		}
	}
	return nil
}
