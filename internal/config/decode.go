package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/tracing"
)

// Parse validates data, the content of the file at path, and returns it as a
// File. Every problem of a kind is reported in one error; when the file has
// problems of several kinds, the error carries the most serious one's code
// (a password in clear, then unknown keys, then bad values) and mentions the
// others.
func Parse(path string, data []byte) (*File, error) {
	var tree map[string]any
	if _, err := toml.Decode(string(data), &tree); err != nil {
		return nil, malformed(path, data, err)
	}
	d := &decoder{}
	f := d.file(tree)
	if err := d.err(path); err != nil {
		return nil, err
	}
	f.Path = path
	return f, nil
}

// decoder walks the parsed tree against the schema and collects problems by
// kind, each naming a key's full path.
type decoder struct {
	literal []string
	unknown []string
	invalid []string
}

type fieldFunc func(path toml.Key, v any)

func child(path toml.Key, k string) toml.Key {
	out := make(toml.Key, len(path), len(path)+1)
	copy(out, path)
	return append(out, k)
}

// fields dispatches each key of m to its handler and records every key that
// has none as unknown.
func (d *decoder) fields(path toml.Key, m map[string]any, known map[string]fieldFunc) {
	for _, k := range sortedKeys(m) {
		p := child(path, k)
		if fn, ok := known[k]; ok {
			fn(p, m[k])
		} else {
			d.unknown = append(d.unknown, p.String())
		}
	}
}

func (d *decoder) badValue(path toml.Key, format string, args ...any) {
	d.invalid = append(d.invalid, path.String()+" ("+fmt.Sprintf(format, args...)+")")
}

func (d *decoder) table(path toml.Key, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.badValue(path, "expected a table, found %s", describe(v))
	}
	return m, ok
}

func (d *decoder) str(dst *string) fieldFunc {
	return func(path toml.Key, v any) {
		s, ok := v.(string)
		if !ok {
			d.badValue(path, "expected a string, found %s", describe(v))
			return
		}
		*dst = s
	}
}

func (d *decoder) boolean(dst **bool) fieldFunc {
	return func(path toml.Key, v any) {
		b, ok := v.(bool)
		if !ok {
			d.badValue(path, "expected true or false, found %s", describe(v))
			return
		}
		*dst = &b
	}
}

func (d *decoder) file(tree map[string]any) *File {
	f := &File{Sources: map[string]Connection{}, Targets: map[string]Connection{}, Sites: map[string]Site{}}
	d.fields(nil, tree, map[string]fieldFunc{
		"temporal": func(p toml.Key, v any) {
			if m, ok := d.table(p, v); ok {
				d.fields(p, m, map[string]fieldFunc{
					"address":         d.str(&f.Temporal.Address),
					"namespace":       d.str(&f.Temporal.Namespace),
					"task_queue":      d.str(&f.Temporal.TaskQueue),
					"tls":             d.boolean(&f.Temporal.TLS),
					"tls_ca":          d.str(&f.Temporal.TLSCA),
					"tls_cert":        d.str(&f.Temporal.TLSCert),
					"tls_key":         d.str(&f.Temporal.TLSKey),
					"tls_server_name": d.str(&f.Temporal.TLSServerName),
					"api_key":         func(p toml.Key, _ any) { d.literal = append(d.literal, p.String()+" (use api_key_env)") },
					"api_key_env":     d.str(&f.Temporal.APIKeyEnv),
					"payload_key":     func(p toml.Key, _ any) { d.literal = append(d.literal, p.String()+" (use payload_key_env)") },
					"payload_key_env": d.str(&f.Temporal.PayloadKeyEnv),
				})
			}
		},
		"store": func(p toml.Key, v any) {
			if m, ok := d.table(p, v); ok {
				d.fields(p, m, map[string]fieldFunc{
					"endpoint":   d.str(&f.Store.Endpoint),
					"region":     d.str(&f.Store.Region),
					"path_style": d.boolean(&f.Store.PathStyle),
				})
			}
		},
		"worker": func(p toml.Key, v any) {
			if m, ok := d.table(p, v); ok {
				d.fields(p, m, map[string]fieldFunc{
					"admin_addr": d.str(&f.Worker.AdminAddr),
					"admin_token": func(p toml.Key, _ any) {
						d.literal = append(d.literal, p.String()+" (use admin_token_env or admin_token_file)")
					},
					"admin_token_env":  d.str(&f.Worker.AdminTokenEnv),
					"admin_token_file": d.str(&f.Worker.AdminTokenFile),
					"admin_tls_cert":   d.str(&f.Worker.AdminTLSCert),
					"admin_tls_key":    d.str(&f.Worker.AdminTLSKey),
					"roles":            d.str(&f.Worker.Roles),
					"otlp_endpoint": func(p toml.Key, v any) {
						d.str(&f.Worker.OTLPEndpoint)(p, v)
						if f.Worker.OTLPEndpoint == "" {
							return
						}
						if _, err := tracing.CheckEndpoint(f.Worker.OTLPEndpoint); err != nil {
							d.badValue(p, "%v", err)
						}
					},
				})
			}
		},
		string(Sources): func(p toml.Key, v any) { d.connections(p, v, Sources, f.Sources) },
		string(Targets): func(p toml.Key, v any) { d.connections(p, v, Targets, f.Targets) },
		"sites":         func(p toml.Key, v any) { d.sites(p, v, f.Sites) },
	})
	return f
}

var connectionName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// named walks a table of named tables ([sources.NAME], [sites.NAME]) in name
// order, refusing names other than letters, digits, '-' and '_', and calls
// each with the name, its path and its table.
func (d *decoder) named(path toml.Key, v any, what string, each func(name string, p toml.Key, m map[string]any)) {
	m, ok := d.table(path, v)
	if !ok {
		return
	}
	for _, name := range sortedKeys(m) {
		p := child(path, name)
		if !connectionName.MatchString(name) {
			d.badValue(p, "a %s name uses only letters, digits, '-' and '_'", what)
			continue
		}
		if nm, ok := d.table(p, m[name]); ok {
			each(name, p, nm)
		}
	}
}

func (d *decoder) connections(path toml.Key, v any, kind Kind, out map[string]Connection) {
	d.named(path, v, "connection", func(name string, p toml.Key, cm map[string]any) {
		c := Connection{Driver: DefaultDriver}
		d.fields(p, cm, map[string]fieldFunc{
			"driver": func(p toml.Key, v any) {
				d.str(&c.Driver)(p, v)
				accepted := KnownDrivers(kind)
				if !slices.Contains(accepted, c.Driver) {
					d.badValue(p, "the accepted engines are: %s", strings.Join(accepted, ", "))
				}
			},
			"dsn": func(p toml.Key, v any) {
				d.str(&c.DSN)(p, v)
				switch {
				case credentials.HasLiteralPassword(c.DSN):
					d.literal = append(d.literal, p.String()+" (a password inside the DSN)")
					c.DSN = ""
				case strings.TrimSpace(c.DSN) == "":
					if _, isString := v.(string); isString {
						d.badValue(p, "empty")
					}
				}
			},
			"password": func(p toml.Key, v any) { c.Password = d.secret(p, v) },
		})
		if _, given := cm["dsn"]; !given {
			d.badValue(p, "dsn is required")
		}
		out[name] = c
	})
}

// sites reads the [sites.NAME] tables.
func (d *decoder) sites(path toml.Key, v any, out map[string]Site) {
	d.named(path, v, "site", func(name string, p toml.Key, sm map[string]any) {
		var s Site
		d.fields(p, sm, map[string]fieldFunc{
			"namespace":  d.str(&s.Namespace),
			"task_queue": d.str(&s.TaskQueue),
			"roles":      d.str(&s.Roles),
		})
		out[name] = s
	})
}

// secret reads a password reference. Anything but a table is a password
// written in clear, whatever its type.
func (d *decoder) secret(path toml.Key, v any) SecretRef {
	m, ok := v.(map[string]any)
	if !ok {
		d.literal = append(d.literal, path.String())
		return SecretRef{}
	}
	var r SecretRef
	d.fields(path, m, map[string]fieldFunc{
		"env":  d.str(&r.Env),
		"file": d.str(&r.File),
	})
	if (r.Env == "") == (r.File == "") {
		d.badValue(path, `give exactly one of { env = "VAR" } or { file = "PATH" }`)
		return SecretRef{}
	}
	return r
}

// err turns the collected problems into one coded error, or nil.
func (d *decoder) err(path string) error {
	parts := []struct {
		code      errcode.Code
		items     []string
		one, many string
	}{
		{errcode.ConfigFileLiteralSecret, d.literal, "password in clear at ", "passwords in clear at "},
		{errcode.ConfigUnknownKey, d.unknown, "unknown key ", "unknown keys "},
		{errcode.ConfigFileInvalid, d.invalid, "invalid value at ", "invalid values at "},
	}
	var code errcode.Code
	var msgs []string
	for _, p := range parts {
		switch len(p.items) {
		case 0:
			continue
		case 1:
			msgs = append(msgs, p.one+p.items[0])
		default:
			msgs = append(msgs, p.many+strings.Join(p.items, ", "))
		}
		if code == "" {
			code = p.code
		}
	}
	if code == "" {
		return nil
	}
	msg := path + ": " + msgs[0]
	if len(msgs) > 1 {
		msg += "; also " + strings.Join(msgs[1:], "; ")
	}
	return errcode.New(code, "%s", msg)
}

// quoted matches double-quoted text in a parser message: it may be part of a
// value (a password), so it is never shown.
var quoted = regexp.MustCompile(`"[^"]*"`)

// malformed turns a parser error into a coded error with the line and column
// of the problem, without quoting the file's content.
func malformed(path string, data []byte, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return errcode.New(errcode.ConfigFileMalformed, "%s: %s", path, quoted.ReplaceAllString(err.Error(), "(hidden text)"))
	}
	msg := pe.Message
	if msg == "" {
		// The message then only exists inside Error(), after its prefix.
		msg = strings.TrimPrefix(pe.Error(), fmt.Sprintf("toml: line %d: ", pe.Position.Line))
		msg = strings.TrimPrefix(msg, fmt.Sprintf("toml: line %d (last key %q): ", pe.Position.Line, pe.LastKey))
	}
	msg = quoted.ReplaceAllString(msg, "(hidden text)")
	line, col := position(data, pe.Position)
	where := fmt.Sprintf("line %d, column %d", line, col)
	if col == 0 {
		where = fmt.Sprintf("line %d", line)
	}
	if pe.LastKey != "" {
		where += " (after key " + pe.LastKey + ")"
	}
	return errcode.New(errcode.ConfigFileMalformed, "%s: %s: %s", path, where, msg)
}

// position returns the 1-based line and byte column of the parser's error
// offset. It counts from the offset itself, so an error on the newline that
// ends a line is reported on that line rather than the next. When the offset
// disagrees with the parser's line, only the line is given (col 0).
func position(data []byte, pos toml.Position) (line, col int) {
	if pos.Start < 0 || pos.Start > len(data) {
		return pos.Line, 0
	}
	before := data[:pos.Start]
	line = bytes.Count(before, []byte("\n")) + 1
	if line != pos.Line && line != pos.Line-1 {
		return pos.Line, 0
	}
	return line, pos.Start - (bytes.LastIndexByte(before, '\n') + 1) + 1
}

func describe(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
