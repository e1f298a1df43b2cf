package temporalcfg

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/errcode"
)

// writePair writes a self-signed certificate and its key as PEM files.
func writePair(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

func TestPlainByDefault(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.ConnectionOptions.TLS != nil || opts.Credentials != nil || opts.DataConverter != nil {
		t.Errorf("defaults configure TLS, credentials or a codec: %+v", opts)
	}
}

func TestTLSAndAPIKey(t *testing.T) {
	certPath, keyPath := writePair(t)
	c := Config{TLSCA: certPath, TLSCert: certPath, TLSKey: keyPath, TLSServerName: "temporal.internal",
		APIKeyEnv: "K", Getenv: func(n string) string { return map[string]string{"K": "the-api-key"}[n] }}
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	tc := opts.ConnectionOptions.TLS
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "temporal.internal" {
		t.Fatalf("TLS config %+v", tc)
	}
	if opts.Credentials == nil {
		t.Error("no API key credentials")
	}
	// An API key alone implies TLS.
	opts, err = Config{APIKeyEnv: "K", Getenv: c.Getenv}.ClientOptions()
	if err != nil || opts.ConnectionOptions.TLS == nil {
		t.Errorf("API key without --temporal-tls: TLS %v, err %v", opts.ConnectionOptions.TLS, err)
	}
}

func TestRefusals(t *testing.T) {
	certPath, keyPath := writePair(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	notPEM := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(notPEM, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := func(string) string { return "" }
	badKey := func(string) string { return base64.StdEncoding.EncodeToString([]byte("short")) }
	for _, tc := range []struct {
		name string
		cfg  Config
		code errcode.Code
		flag string
	}{
		{"cert without key", Config{TLSCert: certPath}, errcode.TemporalTLSInvalid, "--temporal-tls-key"},
		{"key without cert", Config{TLSKey: keyPath}, errcode.TemporalTLSInvalid, "--temporal-tls-cert"},
		{"unreadable CA", Config{TLSCA: missing}, errcode.TemporalTLSInvalid, "--temporal-tls-ca"},
		{"CA not PEM", Config{TLSCA: notPEM}, errcode.TemporalTLSInvalid, "--temporal-tls-ca"},
		{"unreadable cert", Config{TLSCert: missing, TLSKey: keyPath}, errcode.TemporalTLSInvalid, "--temporal-tls-cert"},
		{"unreadable key", Config{TLSCert: certPath, TLSKey: missing}, errcode.TemporalTLSInvalid, "--temporal-tls-key"},
		{"key not PEM", Config{TLSCert: certPath, TLSKey: notPEM}, errcode.TemporalTLSInvalid, "--temporal-tls-key"},
		{"API key unset", Config{APIKeyEnv: "TEMPORAL_KEY", Getenv: empty}, errcode.TemporalAPIKeyUnresolved, "--temporal-api-key-env TEMPORAL_KEY"},
		{"payload key unset", Config{PayloadKeyEnv: "PK", Getenv: empty}, errcode.PayloadKeyInvalid, "--payload-key-env PK"},
		{"payload key short", Config{PayloadKeyEnv: "PK", Getenv: badKey}, errcode.PayloadKeyInvalid, "--payload-key-env PK"},
	} {
		err := tc.cfg.Check()
		e, ok := errcode.As(err)
		if !ok || e.Code != tc.code || e.Exit() != errcode.ExitUsage || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: err = %v, want %s (exit 2) naming %s", tc.name, err, tc.code, tc.flag)
		}
	}
}

func TestPayloadCodecInstalled(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	c := Config{PayloadKeyEnv: "PK", Getenv: func(string) string { return key }}
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.DataConverter == nil || opts.FailureConverter == nil {
		t.Fatal("no data or failure converter")
	}
	p, err := opts.DataConverter.ToPayload("postgres://app@db/prod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.Data), "postgres://") || string(p.Metadata["encoding"]) != "binary/sluice-aes256gcm" {
		t.Errorf("payload not encrypted: %v", p)
	}
	var back string
	if err := opts.DataConverter.FromPayload(p, &back); err != nil || back != "postgres://app@db/prod" {
		t.Errorf("round trip: %q, %v", back, err)
	}
	if s := c.String(); !strings.Contains(s, "payload-key-env=PK") || strings.Contains(s, key) {
		t.Errorf("String() = %q", s)
	}
}
