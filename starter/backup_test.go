package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

func TestSourceDriverFlag(t *testing.T) {
	// The default driver, by any of its names, leaves the input as it was
	// before drivers existed.
	for _, name := range []string{"postgres", "postgresql", "pg", ""} {
		s := sourceFlags{driver: name, dsn: "postgres://app@db:5432/app", passwordEnv: "PW"}
		ref, err := s.ref()
		if err != nil || ref.Driver != "" || ref.DSN != s.dsn || ref.PasswordEnv != "PW" {
			t.Errorf("--source-driver %q: %+v, %v; want no driver recorded", name, ref, err)
		}
	}

	// Another registered driver is recorded by its canonical name.
	if _, ok := source.Canonical("startertest"); !ok {
		source.Register("startertest", "startertest://host/db", func(context.Context, string, map[string]string) (source.Source, error) {
			return nil, errors.New("not opened by the starter")
		}, "startertest-alias")
	}
	s := sourceFlags{driver: "startertest-alias", dsn: "startertest://host/db"}
	if ref, err := s.ref(); err != nil || ref.Driver != "startertest" {
		t.Errorf("--source-driver startertest-alias: %+v, %v", ref, err)
	}

	// An unknown driver is refused, naming the ones there are.
	s = sourceFlags{driver: "oracle", dsn: "oracle://db"}
	if _, err := s.ref(); !errcode.Is(err, errcode.ConfigInvalid) || !strings.Contains(err.Error(), "postgres") {
		t.Errorf("--source-driver oracle: %v; want SLUICE-E-CONFIG-INVALID listing the drivers", err)
	}
}

func TestUnknownSourceDriverExitsTwoBeforeTemporal(t *testing.T) {
	cleanEnv(t)
	for _, cmd := range [][]string{{"backup", "full"}, {"backup", "incremental"}, {"backup", "stream", "run"}} {
		args := append(cmd, "--source-driver", "oracle", "--source", "postgres://app@db/app", "--target", t.TempDir())
		code, _, errOut := runCLI(t, args...)
		if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.ConfigInvalid)) || !strings.Contains(errOut, "use one of mysql, postgres") {
			t.Errorf("%s: exit %d, stderr %s", strings.Join(cmd, " "), code, errOut)
		}
	}
	_, out, _ := runCLI(t, "backup", "full", "--help")
	if !strings.Contains(out, "source engine: mysql, postgres") {
		t.Errorf("backup full --help does not list the source drivers:\n%s", out)
	}
}

// A malformed MySQL-family DSN is refused by the CLI (exit 2) before any
// workflow starts.
func TestMalformedMySQLSourceDSNExitsTwoBeforeTemporal(t *testing.T) {
	cleanEnv(t)
	for _, dsn := range []string{"mysql://root@db:3306/", "mysql://root@db/app?server_id=0", "mysql://root@db/app?bogus=1", "postgres://root@db/app"} {
		code, _, errOut := runCLI(t, "backup", "full", "--source-driver", "mariadb", "--source", dsn, "--target", t.TempDir())
		if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.ConfigInvalid)) || strings.Contains(errOut, "started workflow") {
			t.Errorf("%s: exit %d, stderr %s", dsn, code, errOut)
		}
	}
}
