package install

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Config is what install-cni does, from Calico's environment variables
// (ConfigFromEnv) and its own flags.
type Config struct {
	SourceDir      string   // the image's CNI binaries (flag; default /opt/cni/bin)
	BinDir         string   // the host's /opt/cni/bin as mounted (flag; default /host/opt/cni/bin)
	NetDir         string   // the host's /etc/cni/net.d as mounted (flag; default /host/etc/cni/net.d)
	HostNetDir     string   // CNI_NET_DIR: NetDir as the host sees it (default /etc/cni/net.d)
	ConfName       string   // CNI_CONF_NAME (default 10-calico.conflist)
	Template       string   // CNI_NETWORK_CONFIG, or CNI_NETWORK_CONFIG_FILE's content
	SkipBinaries   []string // SKIP_CNI_BINARIES, comma-separated
	UpdateBinaries bool     // UPDATE_CNI_BINARIES (default true)
	TLSAssetsDir   string   // TLS_ASSETS_DIR (default /calico-secrets)
	Sleep          bool     // SLEEP (default true): stay up refreshing the token
	// Values fills the template's placeholders (see Placeholders); the
	// computed ones are set by Install.
	Values map[string]string
}

// ConfigFromEnv reads Calico's install-cni environment through lookup
// (os.LookupEnv in production).
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(name, def string) string {
		if v, ok := lookup(name); ok {
			return v
		}
		return def
	}
	boolean := func(name string, def bool) (bool, error) {
		v, ok := lookup(name)
		if !ok || v == "" {
			return def, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s=%q is not true or false", name, v)
		}
		return b, nil
	}
	c := Config{
		SourceDir:    "/opt/cni/bin",
		BinDir:       "/host/opt/cni/bin",
		NetDir:       "/host/etc/cni/net.d",
		HostNetDir:   get("CNI_NET_DIR", "/etc/cni/net.d"),
		ConfName:     get("CNI_CONF_NAME", "10-calico.conflist"),
		Template:     get("CNI_NETWORK_CONFIG", ""),
		TLSAssetsDir: get("TLS_ASSETS_DIR", "/calico-secrets"),
		Values:       map[string]string{},
	}
	if f := get("CNI_NETWORK_CONFIG_FILE", ""); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return c, fmt.Errorf("CNI_NETWORK_CONFIG_FILE: %w", err)
		}
		c.Template = string(data)
	}
	if c.Template == "" {
		c.Template = DefaultNetworkConfig
	}
	for _, s := range strings.Split(get("SKIP_CNI_BINARIES", ""), ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.SkipBinaries = append(c.SkipBinaries, s)
		}
	}
	var err error
	if c.UpdateBinaries, err = boolean("UPDATE_CNI_BINARIES", true); err != nil {
		return c, err
	}
	if c.Sleep, err = boolean("SLEEP", true); err != nil {
		return c, err
	}
	for _, p := range Placeholders {
		if p.Env != "" {
			c.Values[p.Name] = get(p.Env, p.Default)
		}
	}
	if c.Values["KUBERNETES_NODE_NAME"] == "" {
		host, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("KUBERNETES_NODE_NAME is unset and the host name unknown: %w", err)
		}
		c.Values["KUBERNETES_NODE_NAME"] = host
	}
	if _, err := strconv.ParseUint(c.Values["CNI_MTU"], 10, 16); err != nil {
		return c, fmt.Errorf("CNI_MTU=%q is not an MTU", c.Values["CNI_MTU"])
	}
	return c, nil
}

// Kube is how install-cni reaches the API server for the plugin's token;
// nil when it does not run in a pod (no kubeconfig is written then).
type Kube struct {
	Client    kubernetes.Interface
	Cluster   Cluster // written into the plugin's kubeconfig
	Refresher TokenRefresher
}

// KubeconfigPath is where the plugin's kubeconfig is written.
func (c Config) KubeconfigPath() string { return filepath.Join(c.NetDir, KubeconfigName) }

// Install installs the binaries, the etcd TLS files, the plugin's
// kubeconfig (a fresh token) and the network configuration, in that order,
// so the configuration that makes the runtime call the plugin comes last.
func Install(ctx context.Context, c Config, kube *Kube, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	installed, err := InstallBinaries(c.SourceDir, c.BinDir, c.SkipBinaries, c.UpdateBinaries)
	if err != nil {
		return err
	}
	log.Info("installed the CNI binaries", "dir", c.BinDir, "binaries", installed)

	if strings.Contains(c.Template, "__SERVICEACCOUNT_TOKEN__") {
		return fmt.Errorf("the CNI network config template embeds __SERVICEACCOUNT_TOKEN__: refused, the token would be world-readable in %s and never refreshed; the plugin reads it from __KUBECONFIG_FILEPATH__", c.ConfName)
	}
	values := map[string]string{}
	for k, v := range c.Values {
		values[k] = v
	}
	values["KUBECONFIG_FILEPATH"] = filepath.Join(c.HostNetDir, KubeconfigName)
	tls := map[string]string{}
	if st, err := os.Stat(c.TLSAssetsDir); err == nil && st.IsDir() {
		if tls, err = InstallTLSAssets(c.TLSAssetsDir, c.NetDir, c.HostNetDir); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", c.TLSAssetsDir, err)
	}
	values["ETCD_CA_CERT_FILE"] = tls["etcd-ca"]
	values["ETCD_CERT_FILE"] = tls["etcd-cert"]
	values["ETCD_KEY_FILE"] = tls["etcd-key"]

	if kube != nil {
		r := kube.Refresher
		r.Kube = kube.Client
		r.Write = func(t string, _ time.Time) error {
			return WriteKubeconfig(c.KubeconfigPath(), kube.Cluster, t)
		}
		expires, err := r.Refresh(ctx)
		if err != nil {
			return err
		}
		log.Info("wrote the CNI plugin's kubeconfig", "path", c.KubeconfigPath(), "tokenExpires", expires)
	}

	conf, err := RenderNetworkConfig(c.Template, values)
	if err != nil {
		return err
	}
	if k8s, err := installCalicoK8sAsCalico(c, conf, installed); err != nil {
		return err
	} else if k8s {
		log.Info("installed calico-k8s as calico: the network configuration uses the Kubernetes datastore", "dir", c.BinDir)
	}
	if err := os.MkdirAll(c.NetDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", c.NetDir, err)
	}
	path := filepath.Join(c.NetDir, c.ConfName)
	if err := WriteFileAtomic(path, conf, 0o644); err != nil {
		return err
	}
	log.Info("wrote the CNI network configuration", "path", path)
	return nil
}
