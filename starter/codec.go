package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/converter"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Defaults of `sluice codec-server`.
const (
	defaultCodecListen = "127.0.0.1:8234"
	// maxCodecBody bounds one /encode or /decode request.
	maxCodecBody = 64 << 20
)

// codecServerCmd serves the payload codec over HTTP for the Temporal UI and
// the temporal CLI (--codec-endpoint): POST /encode and /decode.
func (c *cli) codecServerCmd() *cobra.Command {
	var listen string
	var origins []string
	var allowRemote bool
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Serve /encode and /decode with the payload key, so the Temporal UI shows encrypted payloads to operators who hold the key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.temporal.PayloadKeyEnv == "" {
				return usageError("codec-server needs --payload-key-env VAR (or SLUICE_PAYLOAD_KEY_ENV): the variable holding the payload key")
			}
			if err := checkCodecListen(listen, allowRemote); err != nil {
				return err
			}
			codec, err := c.temporal.PayloadCodec()
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return errcode.Wrap(errcode.ConfigInvalid, err, "--listen %s", listen)
			}
			srv := &http.Server{
				Handler:           codecHandler(converter.NewPayloadCodecHTTPHandler(codec), origins),
				ReadHeaderTimeout: 10 * time.Second,
				ReadTimeout:       time.Minute,
				WriteTimeout:      time.Minute,
			}
			fmt.Fprintf(c.stderr, "codec server on http://%s (payload key ID %s); set it as the codec endpoint in the Temporal UI\n", ln.Addr(), codec.KeyID())
			return serveUntilDone(cmd.Context(), srv, ln)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultCodecListen, "address to listen on; a non-loopback address needs --allow-remote")
	cmd.Flags().StringSliceVar(&origins, "cors-origin", nil, "browser origin allowed to call the server, e.g. http://127.0.0.1:8233 for a local Temporal UI (repeatable)")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback --listen address (the server has no authentication: put a proxy that authenticates operators in front of it)")
	return cmd
}

// checkCodecListen refuses a non-loopback address unless allowRemote: the
// server decrypts anything it is sent and has no authentication of its own.
func checkCodecListen(listen string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return usageError("--listen %q: %v", listen, err)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	what := host
	if host == "" {
		what = "every interface"
	}
	return errcode.New(errcode.CodecServerRemote, "--listen %s would serve %s: the codec server decrypts payloads for anyone who reaches it", listen, what)
}

// codecHandler bounds request bodies and answers CORS for the allowed origins
// (the Temporal UI calls the codec endpoint from the operator's browser).
func codecHandler(h http.Handler, origins []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && slices.Contains(origins, strings.TrimRight(o, "/")) {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
			w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			w.Header().Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxCodecBody)
		h.ServeHTTP(w, r)
	})
}

// serveUntilDone serves on ln until ctx ends, then shuts down gracefully.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
