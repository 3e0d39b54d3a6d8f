// Package agent runs confd: it keeps a running BIRD 2's configuration in
// step with the Calico BGP resources of the datastore, for one node.
// Configuration comes from flags and from calico-node's environment:
// NODENAME (else the host name), CALICO_ROUTER_ID, NAMESPACE (where BGP
// password Secrets live, default kube-system), BGP_LOGSEVERITYSCREEN (the
// log level, over -log-level), the datastore variables
// (DATASTORE_TYPE, ETCD_ENDPOINTS, KUBECONFIG, ... or a CalicoAPIConfig
// file); the other variables of Calico's confd are refused at ERROR
// (settings.go). It is wiring only (see package confd), shared by the confd command
// and calico-node, which runs confd in-process.
package agent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/datastore/kdd/clientset"
	"github.com/tabbynet/tabby/lib/calicolog"
	"github.com/tabbynet/tabby/typha/discovery"
	"github.com/tabbynet/tabby/typha/syncclient"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// options are the command line flags.
type options struct {
	configFile   string
	birdConfig   string
	birdSocket   string
	birdBin      string
	birdcBin     string
	birdLog      string
	logLevel     string
	secretResync time.Duration
	debounce     time.Duration
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("confd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.configFile, "config", "", "CalicoAPIConfig file; the environment overrides it (default "+dsconfig.DefaultConfigFile+" if it exists)")
	fs.StringVar(&o.birdConfig, "bird-config", "/etc/calico/confd/config/bird.cfg", "BIRD's configuration file (the one BIRD was started with -c)")
	fs.StringVar(&o.birdSocket, "bird-socket", "/var/run/calico/bird.ctl", "BIRD's control socket (bird -s)")
	fs.StringVar(&o.birdBin, "bird", "bird", "bird binary, used to validate configs (bird -p -c)")
	fs.StringVar(&o.birdcBin, "birdc", "birdc", "birdc binary, used to reload (birdc configure)")
	fs.StringVar(&o.birdLog, "bird-log", "", "file BIRD logs to (empty: BIRD's stderr)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&o.secretResync, "secret-resync", 30*time.Second, "how often BGP password Secrets are re-read")
	fs.DurationVar(&o.debounce, "debounce", 20*time.Millisecond, "quiet time after a change before rendering")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: confd [flags]\n\nRenders the node's BIRD 2 configuration from the Calico datastore and reloads BIRD.\n"+
			"Environment: NODENAME, CALICO_ROUTER_ID, NAMESPACE, DATASTORE_TYPE, ETCD_ENDPOINTS, KUBECONFIG, ...\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

// Run runs confd with the command line args until ctx is cancelled; it
// logs to stderr. flag.ErrHelp when args asked for the usage.
func Run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	return RunWith(ctx, args, getenv, stderr, Hooks{})
}

// Hooks are what a caller running confd in-process (calico-node) adds.
type Hooks struct {
	// Control, when set, drives BIRD instead of bird/birdc on the socket
	// (calico-node's supervisor, which starts BIRD on the first config).
	Control bird.Control
	// Logger, when set, replaces the one made from -log-level.
	Logger *slog.Logger
	// Heartbeat and OnSync are the daemon's (confd.Config).
	Heartbeat func()
	OnSync    func(error)
}

// RunWith is Run with hooks.
func RunWith(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, h Hooks) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("-log-level %q: %w", o.logLevel, err)
	}
	envLevel, fromEnv, err := bgpLogLevel(getenv)
	if err != nil {
		return err
	}
	var levelVar slog.LevelVar
	levelVar.Set(level)
	if fromEnv {
		levelVar.Set(envLevel)
	}
	log := slog.New(calicolog.New(stderr, calicolog.Options{Component: "confd", Level: &levelVar, JSON: calicolog.JSONFromEnv(getenv)}))
	if h.Logger != nil {
		log = h.Logger
	} else {
		// confd's own process: what logs through slog's default (the
		// datastore's syncer) writes the same lines.
		slog.SetDefault(log)
	}
	for _, r := range refusedSettings(getenv) {
		log.Error("confd setting refused", "setting", r[0], "value", getenv(r[0]), "reason", r[1])
	}
	nodeName := strings.TrimSpace(getenv("NODENAME"))
	if nodeName == "" {
		if nodeName, err = os.Hostname(); err != nil {
			return fmt.Errorf("no NODENAME and no host name: %w", err)
		}
	}

	// Long-running: etcd's client library.
	backends := dsconfig.Backends{Kubernetes: kdd.FromSpec, EtcdTransport: etcdlib.New}
	cfgFile, explicit := o.configFile, o.configFile != ""
	if !explicit {
		cfgFile = dsconfig.DefaultConfigFile
	}
	spec, err := dsconfig.Load(cfgFile, explicit, getenv)
	if err != nil {
		return err
	}
	client, err := backends.New(spec)
	if err != nil {
		return fmt.Errorf("connecting to the datastore: %w", err)
	}
	defer client.Close()

	var ctl bird.Control = bird.Exec{Bird: o.birdBin, Birdc: o.birdcBin, Socket: o.birdSocket}
	if h.Control != nil {
		ctl = h.Control
	}
	drv, err := bird.NewDriver(o.birdConfig, ctl)
	if err != nil {
		return err
	}
	cfg := confd.Config{NodeName: nodeName, RouterID: getenv("CALICO_ROUTER_ID"), LogFile: o.birdLog,
		Debounce: o.debounce, SecretResync: o.secretResync, Logger: log, Heartbeat: h.Heartbeat, OnSync: h.OnSync}
	var (
		d      *confd.Daemon
		syncer datastore.Syncer
	)
	// The syncer's output goes through the log level follower unless the
	// environment fixed the level.
	callbacks := func(d *confd.Daemon) datastore.SyncerCallbacks {
		if fromEnv {
			return d
		}
		return &levelFollower{next: d, level: &levelVar, flag: level, node: nodeName, log: log}
	}
	if kc, ok := client.(*kdd.Client); ok {
		ns := confd.SecretNamespace(getenv)
		kube, err := clientset.For(kc)
		if err != nil {
			return err
		}
		cfg.Secrets = confd.KubeSecrets{Client: kube, Namespace: ns}
		d = confd.NewDaemon(cfg, drv)
		syncer = kdd.NewSyncer(kc, confd.Kinds, callbacks(d))
		log.Info("BGP password Secrets are read from namespace", "namespace", ns)
	} else {
		cfg.Secrets = confd.NoSecrets{Datastore: spec.DatastoreType}
		d = confd.NewDaemon(cfg, drv)
		syncer = datastore.NewWatchSyncer(client, confd.Kinds, callbacks(d), datastore.DefaultBackoff)
	}
	if typha, err := typhaSettings(getenv); err != nil {
		return err
	} else if typha.Enabled() {
		if syncer, err = TyphaSyncer(client, typha, nodeName, log, callbacks(d)); err != nil {
			return err
		}
		log.Info("following the datastore through Typha", "addr", typha.Addr, "service", typha.K8sServiceName)
	}
	log.Info("confd starting", "node", nodeName, "datastore", spec.DatastoreType,
		"birdConfig", drv.Path(), "birdSocket", o.birdSocket)
	d.RunSyncer(ctx, syncer)
	log.Info("confd stopped")
	return nil
}

// TyphaSyncer is confd's syncer through Typha: its "bgp" stream, confd's
// kinds, resynced on a reconnection without a delete and re-add of
// unchanged objects (typha/syncclient).
func TyphaSyncer(c datastore.Client, t discovery.Settings, node string, log *slog.Logger, cb datastore.SyncerCallbacks) (datastore.Syncer, error) {
	kube, err := clientset.Of(c)
	if err != nil {
		return nil, err
	}
	cfg, err := t.Config(kube, discovery.Client{SyncerType: syncproto.SyncerTypeBGP, Kinds: confd.Kinds,
		Hostname: node, Info: "confd", Log: log})
	if err != nil {
		return nil, err
	}
	return syncclient.New(cfg, cb), nil
}
