// Package discovery finds Typha for its clients from Calico's settings:
// an address (FELIX_TYPHAADDR), or a Kubernetes Service
// (FELIX_TYPHAK8SSERVICENAME in FELIX_TYPHAK8SNAMESPACE) whose ready
// endpoints' port named "calico-typha" are the replicas; and makes the
// syncclient.Config for a felix or confd from them.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tabbynet/tabby/typha/syncclient"
	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/tlsconfig"
)

// PortName is the name of Typha's port on its Service (Calico's).
const PortName = "calico-typha"

// Settings are a client's Typha settings (Calico's Typha* parameters).
type Settings struct {
	Addr           string
	K8sServiceName string
	K8sNamespace   string // default kube-system
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	TLS            tlsconfig.Files
	// Dial, if set, is syncclient.Config.Dial (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Enabled reports whether the settings name a Typha.
func (s Settings) Enabled() bool { return s.Addr != "" || s.K8sServiceName != "" }

// ErrNeedsKubernetes: the Service is named but there is no Kubernetes
// client to look it up with.
var ErrNeedsKubernetes = errors.New("TyphaK8sServiceName needs the Kubernetes API (the Kubernetes datastore); set TyphaAddr instead")

// Addrs returns the function that lists the replicas. kube may be nil
// when Addr is set.
func (s Settings) Addrs(kube kubernetes.Interface) (func(context.Context) ([]string, error), error) {
	if s.Addr != "" {
		addr := s.Addr
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(addr, strconv.Itoa(syncproto.DefaultPort))
		}
		return func(context.Context) ([]string, error) { return []string{addr}, nil }, nil
	}
	if kube == nil {
		return nil, ErrNeedsKubernetes
	}
	ns := s.K8sNamespace
	if ns == "" {
		ns = "kube-system"
	}
	svc := s.K8sServiceName
	return func(ctx context.Context) ([]string, error) { return serviceAddrs(ctx, kube, ns, svc) }, nil
}

func serviceAddrs(ctx context.Context, kube kubernetes.Interface, ns, svc string) ([]string, error) {
	out, err := endpointAddrs(ctx, kube, ns, svc, PortName, true)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("Service %s/%s has no ready endpoint with a port named %s", ns, svc, PortName)
	}
	return out, err
}

// CountReplicas is the number of Typhas behind Service ns/svc, as Calico's
// Typha counts them for rebalancing: the distinct addresses of its
// EndpointSlices that have a port named port, ready or not.
func CountReplicas(ctx context.Context, kube kubernetes.Interface, ns, svc, port string) (int, error) {
	addrs, err := endpointAddrs(ctx, kube, ns, svc, port, false)
	return len(slices.Compact(addrs)), err
}

// endpointAddrs lists Service ns/svc's endpoint addresses at the port
// named port (host:port, sorted), the ready ones only if readyOnly.
func endpointAddrs(ctx context.Context, kube kubernetes.Interface, ns, svc, port string, readyOnly bool) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, fmt.Errorf("listing the endpoints of Service %s/%s: %w", ns, svc, err)
	}
	var out []string
	for _, es := range list.Items {
		out = append(out, sliceAddrs(es, port, readyOnly)...)
	}
	sort.Strings(out)
	return out, nil
}

// sliceAddrs are the addresses of one EndpointSlice at its port named
// name (the ready ones only if readyOnly).
func sliceAddrs(es discoveryv1.EndpointSlice, name string, readyOnly bool) []string {
	port := 0
	for _, p := range es.Ports {
		if p.Name != nil && *p.Name == name && p.Port != nil {
			port = int(*p.Port)
		}
	}
	if port == 0 {
		return nil
	}
	var out []string
	for _, ep := range es.Endpoints {
		if readyOnly && ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			continue
		}
		for _, a := range ep.Addresses {
			out = append(out, net.JoinHostPort(a, strconv.Itoa(port)))
		}
	}
	return out
}

// Client is what NewClient needs besides the settings.
type Client struct {
	SyncerType syncproto.SyncerType
	Kinds      []string
	Lean       bool
	Hostname   string
	Info       string
	Log        *slog.Logger
}

// Config returns the syncclient configuration for c under s.
func (s Settings) Config(kube kubernetes.Interface, c Client) (syncclient.Config, error) {
	addrs, err := s.Addrs(kube)
	if err != nil {
		return syncclient.Config{}, err
	}
	cfg := syncclient.Config{SyncerType: c.SyncerType, Kinds: c.Kinds, Lean: c.Lean, Hostname: c.Hostname, Info: c.Info,
		Addrs: addrs, ReadTimeout: s.ReadTimeout, WriteTimeout: s.WriteTimeout, Log: c.Log, Dial: s.Dial}
	files, dropped := s.TLS.Existing()
	if len(dropped) > 0 && c.Log != nil {
		c.Log.Warn("ignoring Typha certificate settings naming missing files (as Calico's felix)", "settings", dropped)
	}
	if files.Set() {
		if cfg.TLS, err = tlsconfig.Client(files); err != nil {
			return syncclient.Config{}, fmt.Errorf("Typha TLS (TyphaCertFile, TyphaKeyFile, TyphaCAFile, TyphaCN/TyphaURISAN): %w", err)
		}
	}
	return cfg, nil
}
