// Package credentials keeps secrets out of Temporal: the starter passes a DSN
// without its password plus a reference to where the worker finds it, and the
// worker resolves the reference just before it connects.
package credentials

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice/internal/errcode"
)

// DSNRef is a database connection string that is safe to store in workflow
// history: it never holds a password, only a reference to one.
type DSNRef struct {
	// Driver names the engine (target.Open, source.Open); "" is PostgreSQL,
	// the only engine of runs recorded before drivers existed.
	Driver string `json:"driver,omitempty"`
	// DSN is the connection string without a password (URL or key=value
	// form; a file path for SQLite).
	DSN string `json:"dsn"`
	// PasswordEnv names an environment variable of the worker holding the password.
	PasswordEnv string `json:"password_env,omitempty"`
	// PasswordFile is a path on the worker's host whose content is the password.
	PasswordFile string `json:"password_file,omitempty"`
	// Options are the driver's options, none of them secret.
	Options map[string]string `json:"options,omitempty"`
}

var kvPassword = regexp.MustCompile(`(?i)(^|\s)password\s*=`)

// HasLiteralPassword reports whether dsn carries a password in clear.
func HasLiteralPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql" || u.Scheme == "mysql" || u.Scheme == "mariadb") {
		if _, set := u.User.Password(); set {
			return true
		}
		return u.Query().Has("password")
	}
	return kvPassword.MatchString(dsn)
}

// NewDSNRef checks that dsn holds no literal password and returns a reference
// carrying it. what names the flag for the error message ("--source").
func NewDSNRef(what, dsn, passwordEnv, passwordFile string) (DSNRef, error) {
	if strings.TrimSpace(dsn) == "" {
		return DSNRef{}, errcode.New(errcode.Usage, "%s is required", what)
	}
	if HasLiteralPassword(dsn) {
		return DSNRef{}, errcode.New(errcode.LiteralSecret, "%s %s carries a literal password", what, Redact(dsn))
	}
	if passwordEnv != "" && passwordFile != "" {
		return DSNRef{}, errcode.New(errcode.Usage, "%s: give either a password environment variable or a password file, not both", what)
	}
	return DSNRef{DSN: dsn, PasswordEnv: passwordEnv, PasswordFile: passwordFile}, nil
}

// Resolve returns the DSN with the referenced password filled in. It runs in
// the worker. A DSN without a reference is returned as is (libpq's
// PGPASSWORD and .pgpass then apply).
func (r DSNRef) Resolve() (string, error) {
	var pw string
	switch {
	case r.PasswordEnv != "":
		v, ok := os.LookupEnv(r.PasswordEnv)
		if !ok {
			return "", errcode.New(errcode.SecretUnresolved, "environment variable %s is not set in the worker", r.PasswordEnv)
		}
		pw = v
	case r.PasswordFile != "":
		b, err := os.ReadFile(r.PasswordFile)
		if err != nil {
			return "", errcode.Wrap(errcode.SecretUnresolved, err, "password file %s", r.PasswordFile)
		}
		pw = strings.TrimRight(string(b), "\r\n")
	default:
		return r.DSN, nil
	}
	return withPassword(r.DSN, pw)
}

func withPassword(dsn, pw string) (string, error) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql" || u.Scheme == "mysql" || u.Scheme == "mariadb") {
		name := ""
		if u.User != nil {
			name = u.User.Username()
		}
		u.User = url.UserPassword(name, pw)
		return u.String(), nil
	}
	if strings.Contains(dsn, "=") || strings.TrimSpace(dsn) == "" {
		return dsn + " password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'", nil
	}
	return "", errcode.New(errcode.ConfigInvalid, "cannot add a password to DSN %s: use the postgres:// URL or key=value form", Redact(dsn))
}

// Redact returns dsn with any password replaced by "xxxxx", for messages.
func Redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Host != "" {
		if _, set := u.User.Password(); set {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return regexp.MustCompile(`(?i)(password\s*=\s*)('([^'\\]|\\.)*'|\S+)`).ReplaceAllString(dsn, "${1}xxxxx")
}

// String describes the reference without any secret.
func (r DSNRef) String() string {
	s := Redact(r.DSN)
	switch {
	case r.PasswordEnv != "":
		s += fmt.Sprintf(" (password from $%s)", r.PasswordEnv)
	case r.PasswordFile != "":
		s += fmt.Sprintf(" (password from %s)", r.PasswordFile)
	}
	return s
}
