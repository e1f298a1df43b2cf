// Package temporalcfg holds the one definition of how the sluice binaries
// find Temporal: flags, their environment fallbacks, transport security, the
// payload codec, and the dial.
package temporalcfg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/payloadcodec"
)

// Defaults used when neither a flag nor the environment sets a value.
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
	DefaultTaskQueue = "sluice"
)

// Environment fallbacks of the transport and codec flags. The TLS ones are
// those the temporal CLI reads; the two references are sluice's own, because
// they hold the name of a variable, not a secret.
const (
	EnvTLS           = "TEMPORAL_TLS"
	EnvTLSCA         = "TEMPORAL_TLS_CA_PATH"
	EnvTLSCert       = "TEMPORAL_TLS_CERT_PATH"
	EnvTLSKey        = "TEMPORAL_TLS_KEY_PATH"
	EnvTLSServerName = "TEMPORAL_TLS_SERVER_NAME"
	EnvAPIKeyEnv     = "SLUICE_TEMPORAL_API_KEY_ENV"
	EnvPayloadKeyEnv = "SLUICE_PAYLOAD_KEY_ENV"
)

// Config says where the Temporal frontend is, how to reach it securely, which
// task queue sluice uses, and whether payloads are encrypted.
type Config struct {
	Address   string
	Namespace string
	TaskQueue string

	// TLS turns on TLS to the frontend with the system roots (or TLSCA).
	// Any other TLS option, and an API key, imply it.
	TLS           bool
	TLSCA         string
	TLSCert       string
	TLSKey        string
	TLSServerName string
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string
	// PayloadKeyEnv names the environment variable holding the base64
	// 32-byte payload key; empty leaves payloads in clear.
	PayloadKeyEnv string

	// MetricsHandler, when set, receives the SDK's own metrics. It is not a
	// flag: the worker sets it to its telemetry's handler.
	MetricsHandler client.MetricsHandler `json:"-"`
	// Interceptors go into the client options as they are: the tracing
	// interceptor, when tracing is on. They apply to the workers built on
	// the client too. Not a flag.
	Interceptors []interceptor.ClientInterceptor `json:"-"`
	// Getenv reads the referenced variables; nil means os.Getenv.
	Getenv func(string) string `json:"-"`
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

// Bind registers --temporal-address, --namespace and --task-queue (defaulting
// to TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and SLUICE_TASK_QUEUE), the
// --temporal-tls* and --temporal-api-key-env flags, and --payload-key-env.
func (c *Config) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.Address, "temporal-address", envOr("TEMPORAL_ADDRESS", DefaultAddress), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&c.Namespace, "namespace", envOr("TEMPORAL_NAMESPACE", DefaultNamespace), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&c.TaskQueue, "task-queue", envOr("SLUICE_TASK_QUEUE", DefaultTaskQueue), "Temporal task queue the sluice worker polls (env SLUICE_TASK_QUEUE)")
	fs.BoolVar(&c.TLS, "temporal-tls", envBool(EnvTLS), "connect to Temporal over TLS; implied by every other --temporal-tls-* flag and by --temporal-api-key-env (env "+EnvTLS+")")
	fs.StringVar(&c.TLSCA, "temporal-tls-ca", envOr(EnvTLSCA, ""), "PEM bundle of the CAs that sign the Temporal frontend's certificate (default: the system roots) (env "+EnvTLSCA+")")
	fs.StringVar(&c.TLSCert, "temporal-tls-cert", envOr(EnvTLSCert, ""), "PEM client certificate for mTLS to Temporal; needs --temporal-tls-key (env "+EnvTLSCert+")")
	fs.StringVar(&c.TLSKey, "temporal-tls-key", envOr(EnvTLSKey, ""), "PEM private key of --temporal-tls-cert (env "+EnvTLSKey+")")
	fs.StringVar(&c.TLSServerName, "temporal-tls-server-name", envOr(EnvTLSServerName, ""), "name to verify the frontend's certificate against (default: the host of --temporal-address) (env "+EnvTLSServerName+")")
	fs.StringVar(&c.APIKeyEnv, "temporal-api-key-env", envOr(EnvAPIKeyEnv, ""), "name of the environment variable holding the Temporal API key; implies TLS (env "+EnvAPIKeyEnv+")")
	fs.StringVar(&c.PayloadKeyEnv, "payload-key-env", envOr(EnvPayloadKeyEnv, ""), "name of the environment variable holding a base64 32-byte key; encrypts every workflow payload with AES-256-GCM (env "+EnvPayloadKeyEnv+")")
}

func (c Config) getenv(name string) string {
	if c.Getenv != nil {
		return c.Getenv(name)
	}
	return os.Getenv(name)
}

// TLSEnabled reports whether the connection uses TLS.
func (c Config) TLSEnabled() bool {
	return c.TLS || c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != "" || c.TLSServerName != "" || c.APIKeyEnv != ""
}

// TLSConfig builds the client TLS configuration, or nil when TLS is off. A
// certificate without its key (or the reverse) and a file that cannot be read
// or parsed are refused with SLUICE-E-TEMPORAL-TLS-INVALID naming the flag.
func (c Config) TLSConfig() (*tls.Config, error) {
	if !c.TLSEnabled() {
		return nil, nil
	}
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		return nil, errcode.New(errcode.TemporalTLSInvalid, "--temporal-tls-cert is set but --temporal-tls-key is not: a client certificate needs its key")
	case c.TLSKey != "" && c.TLSCert == "":
		return nil, errcode.New(errcode.TemporalTLSInvalid, "--temporal-tls-key is set but --temporal-tls-cert is not: a client key needs its certificate")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, errcode.Wrap(errcode.TemporalTLSInvalid, err, "--temporal-tls-ca %s", c.TLSCA)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errcode.New(errcode.TemporalTLSInvalid, "--temporal-tls-ca %s holds no PEM certificate", c.TLSCA)
		}
		cfg.RootCAs = pool
	}
	if c.TLSCert != "" {
		for _, f := range [][2]string{{"--temporal-tls-cert", c.TLSCert}, {"--temporal-tls-key", c.TLSKey}} {
			if _, err := os.ReadFile(f[1]); err != nil {
				return nil, errcode.Wrap(errcode.TemporalTLSInvalid, err, "%s %s", f[0], f[1])
			}
		}
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			// The parser's message never quotes key material.
			return nil, errcode.Wrap(errcode.TemporalTLSInvalid, err, "--temporal-tls-cert %s / --temporal-tls-key %s", c.TLSCert, c.TLSKey)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// PayloadCodec returns the codec --payload-key-env configures, or nil when
// payloads stay in clear.
func (c Config) PayloadCodec() (*payloadcodec.Codec, error) {
	if c.PayloadKeyEnv == "" {
		return nil, nil
	}
	return payloadcodec.FromEnv(c.PayloadKeyEnv, "--payload-key-env", c.getenv)
}

// ClientOptions checks the configuration and returns the SDK client options
// it describes. Every refusal is a coded usage error (exit 2) naming the flag;
// no secret value appears in it.
func (c Config) ClientOptions() (client.Options, error) {
	opts := client.Options{HostPort: c.Address, Namespace: c.Namespace, MetricsHandler: c.MetricsHandler, Interceptors: c.Interceptors}
	tlsCfg, err := c.TLSConfig()
	if err != nil {
		return client.Options{}, err
	}
	opts.ConnectionOptions.TLS = tlsCfg
	if c.APIKeyEnv != "" {
		key := c.getenv(c.APIKeyEnv)
		if key == "" {
			return client.Options{}, errcode.New(errcode.TemporalAPIKeyUnresolved, "--temporal-api-key-env %s: the environment variable %s is unset or empty", c.APIKeyEnv, c.APIKeyEnv)
		}
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	codec, err := c.PayloadCodec()
	if err != nil {
		return client.Options{}, err
	}
	if codec != nil {
		dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec)
		opts.DataConverter = dc
		// Failure messages and stack traces go into the encrypted payloads
		// too: they may quote inputs.
		opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
			DataConverter: dc, EncodeCommonAttributes: true,
		})
	}
	return opts, nil
}

// Check validates the configuration without connecting.
func (c Config) Check() error {
	_, err := c.ClientOptions()
	return err
}

// Dial connects to Temporal and checks that the frontend answers.
func (c Config) Dial(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	opts, err := c.ClientOptions()
	if err != nil {
		return nil, err
	}
	if logger != nil {
		opts.Logger = tlog.NewStructuredLogger(logger)
	}
	cl, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, errcode.Wrap(errcode.TemporalUnreachable, err, "dial Temporal at %s", c.Address)
	}
	if _, err := cl.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		cl.Close()
		return nil, errcode.Wrap(errcode.TemporalUnreachable, err, "Temporal at %s is not healthy", c.Address)
	}
	return cl, nil
}

// String describes the configuration for logs; it names references, never
// the secrets they point at.
func (c Config) String() string {
	s := fmt.Sprintf("%s namespace=%s task-queue=%s tls=%t", c.Address, c.Namespace, c.TaskQueue, c.TLSEnabled())
	if c.APIKeyEnv != "" {
		s += " api-key-env=" + c.APIKeyEnv
	}
	if c.PayloadKeyEnv != "" {
		s += " payload-key-env=" + c.PayloadKeyEnv
	}
	return s
}

// Converters returns the data and failure converters the client uses, so a
// caller can read payloads and failures Temporal hands back outside the SDK's
// own calls (heartbeat details and last failures in a workflow description).
func (c Config) Converters() (converter.DataConverter, converter.FailureConverter, error) {
	opts, err := c.ClientOptions()
	if err != nil {
		return nil, nil, err
	}
	dc, fc := opts.DataConverter, opts.FailureConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	if fc == nil {
		fc = temporal.GetDefaultFailureConverter()
	}
	return dc, fc, nil
}
