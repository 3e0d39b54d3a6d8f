// Command goldmane is Tabby's flow aggregator (Calico's Goldmane) and its
// flow page (like Calico's Whisker): every node's felix sends its flows
// here (FlowLogsGoldmaneServer); Calico's Flows API and the page on
// TABBY_PAGE_PORT (8081) show them. Configured by Calico's Goldmane
// environment (see package daemon).
//
// `goldmane certs -dir DIR -names goldmane.kube-system.svc,... -client CN`
// writes a CA, the aggregator's certificate and the nodes' client
// certificate for the Secrets the manifests mount.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/goldmane/certs"
	"github.com/tabbynet/tabby/goldmane/daemon"
	"github.com/tabbynet/tabby/lib/calicolog"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "certs" {
		if err := writeCerts(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "goldmane certs:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := daemon.FromEnv(os.Getenv)
	if err == nil {
		level := slog.LevelInfo
		if err := level.UnmarshalText([]byte(os.Getenv("LOG_LEVEL"))); err != nil {
			level = slog.LevelInfo
		}
		cfg.Log = slog.New(calicolog.New(os.Stderr, calicolog.Options{Component: "goldmane", Level: level, JSON: calicolog.JSONFromEnv(os.Getenv)}))
		err = daemon.Run(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goldmane:", err)
		os.Exit(1)
	}
}

func writeCerts(args []string) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "where to write ca.crt, server/tls.{crt,key}, client/tls.{crt,key}")
	names := fs.String("names", "goldmane.kube-system.svc,goldmane.kube-system.svc.cluster.local", "the aggregator's DNS names or IPs, comma-separated")
	client := fs.String("client", "calico-node", "the nodes' certificate's common name")
	days := fs.Int("days", 365, "validity in days")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	_, err := certs.Write(*dir, strings.Split(*names, ","), *client, time.Duration(*days)*24*time.Hour)
	return err
}
