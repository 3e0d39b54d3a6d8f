// Package daemon wires Tabby's Goldmane: the store, the gRPC services
// (goldmane/server) on Port with mutual TLS, the flow page (goldmane/web)
// on PagePort, health (/liveness, /readiness) on HealthPort and metrics on
// PrometheusPort. Settings are Calico's Goldmane environment variables
// where it has them (PORT, SERVER_CERT_PATH, SERVER_KEY_PATH,
// CA_CERT_PATH, AGGREGATION_WINDOW, HEALTH_PORT, PROMETHEUS_PORT,
// LOG_LEVEL); the page's port is Whisker's (8081).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tabbynet/tabby/goldmane/server"
	"github.com/tabbynet/tabby/goldmane/store"
	"github.com/tabbynet/tabby/goldmane/web"
)

// Config is the aggregator's settings.
type Config struct {
	Host                      string // listen address of every port ("" all)
	Port                      int    // gRPC (Calico's default 443; its operator uses 7443)
	Socket                    string // gRPC on this Unix socket instead of Port (the lab's nodes)
	PagePort                  int    // the page (0: off)
	HealthPort                int    // /liveness and /readiness (0: off)
	PrometheusPort            int    // /metrics (0: off)
	CertFile, KeyFile, CAFile string // TLS; none: plain gRPC
	Store                     store.Config
	Log                       *slog.Logger
}

// FromEnv reads Calico's Goldmane environment (and Tabby's
// TABBY_PAGE_PORT, TABBY_RETENTION, TABBY_LISTEN_HOST, TABBY_LISTEN_SOCKET).
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{Port: 443, PagePort: 8081, HealthPort: 8080, Host: getenv("TABBY_LISTEN_HOST"),
		Socket: getenv("TABBY_LISTEN_SOCKET"), CertFile: getenv("SERVER_CERT_PATH"), KeyFile: getenv("SERVER_KEY_PATH"), CAFile: getenv("CA_CERT_PATH")}
	for name, dst := range map[string]*int{"PORT": &c.Port, "TABBY_PAGE_PORT": &c.PagePort,
		"HEALTH_PORT": &c.HealthPort, "PROMETHEUS_PORT": &c.PrometheusPort} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return c, fmt.Errorf("%s=%q: want a port number", name, v)
			}
			*dst = n
		}
	}
	for name, dst := range map[string]*time.Duration{"AGGREGATION_WINDOW": &c.Store.Interval, "TABBY_RETENTION": &c.Store.Retention} {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second {
				return c, fmt.Errorf("%s=%q: want a duration of at least 1s", name, v)
			}
			*dst = d
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return c, errors.New("SERVER_CERT_PATH and SERVER_KEY_PATH go together")
	}
	return c, nil
}

// Run serves until ctx ends. Ready is set once every listener is open.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	st := store.New(cfg.Store)
	reg := prometheus.NewRegistry()
	srv := server.New(st, log, reg)
	var opts []grpc.ServerOption
	if cfg.CertFile != "" {
		t, err := server.TLSConfig(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(t)))
	} else {
		log.Warn("no SERVER_CERT_PATH: serving flows without TLS")
	}
	g := grpc.NewServer(opts...)
	srv.Register(g)
	network, addr := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	if cfg.Socket != "" {
		network, addr = "unix", cfg.Socket
		if err := os.Remove(cfg.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing a stale socket: %w", err)
		}
	}
	gl, err := net.Listen(network, addr)
	if err != nil {
		return fmt.Errorf("listening for flows: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	run(func() error { return server.Serve(ctx, g, gl) })
	run(func() error { srv.Rollovers(ctx); return nil })
	serveHTTP := func(what string, port int, h http.Handler) error {
		if port == 0 {
			return nil
		}
		l, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("listening for %s: %w", what, err)
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		run(func() error {
			go func() { <-ctx.Done(); hs.Close() }()
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving %s: %w", what, err)
			}
			return nil
		})
		log.Info("serving", "what", what, "addr", l.Addr().String())
		return nil
	}
	health := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }
	health.HandleFunc("GET /liveness", ok)
	health.HandleFunc("GET /readiness", ok)
	for _, s := range []struct {
		what string
		port int
		h    http.Handler
	}{
		{"the flow page", cfg.PagePort, web.Handler(st, time.Now)},
		{"health", cfg.HealthPort, health},
		{"metrics", cfg.PrometheusPort, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})},
	} {
		if err := serveHTTP(s.what, s.port, s.h); err != nil {
			cancel()
			wg.Wait()
			return err
		}
	}
	log.Info("aggregating flows", "addr", gl.Addr().String(), "tls", cfg.CertFile != "", "interval", st.Interval())
	<-ctx.Done()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
