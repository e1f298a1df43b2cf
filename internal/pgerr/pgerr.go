// Package pgerr codes PostgreSQL errors for one side of a replication (the
// source or the target): a missing privilege refuses, a failed connection or
// authentication is "unreachable", everything else keeps its context.
package pgerr

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	// Shared by the two PostgreSQL engines (source/postgres, target/postgres), which alone import it.
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Side names the codes of one side.
type Side struct {
	// Privileges is the code of a missing privilege (SQLSTATE 42501).
	Privileges errcode.Code
	// Unreachable is the code of a failed connection or authentication.
	Unreachable errcode.Code
	// Value, when set, is the code of a data exception (SQLSTATE class
	// 22): a value the server will not take, which no retry changes.
	Value errcode.Code
}

// Classify turns err into a coded error where one applies, with what as
// context. An error that already carries a code is returned unchanged.
func (s Side) Classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "42501":
			return errcode.Wrap(s.Privileges, err, "%s", what)
		case s.Value != "" && strings.HasPrefix(pgErr.Code, "22"):
			return errcode.Wrap(s.Value, err, "%s: the server will not take a value (SQLSTATE %s)", what, pgErr.Code)
		case pgErr.Code == "28P01" || pgErr.Code == "28000":
			return errcode.Wrap(s.Unreachable, err, "%s: authentication failed", what)
		case unavailable(pgErr.Code):
			return errcode.Wrap(s.Unreachable, err, "%s: the server is not accepting this session", what)
		}
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	switch {
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return errcode.Wrap(errcode.DBTLSRefused, err, "%s: the server refused TLS (it answered 'N' to the TLS request)", what)
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &badHost):
		return errcode.Wrap(errcode.DBTLSRefused, err, "%s: the server's TLS certificate did not verify", what)
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return errcode.Wrap(s.Unreachable, err, "%s", what)
	}
	var netErr net.Error
	if pgErr == nil && (errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
		return errcode.Wrap(s.Unreachable, err, "%s: the connection was lost", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// unavailable reports SQLSTATEs that say the server will not serve the
// session now, whatever it asked: connection exceptions (class 08), an
// administrator ending the session or the server shutting down or starting
// (57P01-57P03) and too many connections (53300). Any error while connecting
// (a database that refuses connections, say) is unreachable too.
func unavailable(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "53300":
		return true
	}
	return len(code) == 5 && code[:2] == "08"
}
