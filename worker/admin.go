package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
)

// readiness answers /readyz: the worker has started polling and Temporal answers.
type readiness struct {
	client  client.Client
	started atomic.Bool
}

func (r *readiness) ready(ctx context.Context) error {
	if !r.started.Load() {
		return errors.New("worker not polling yet")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := r.client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	return nil
}

func serveAdmin(addr string, r *readiness, logger *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		if err := r.ready(req.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin endpoint stopped", "err", err)
		}
	}()
	logger.Info("admin endpoint listening", "addr", ln.Addr().String())
	return srv, nil
}
