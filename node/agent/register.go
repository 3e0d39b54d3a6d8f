package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/node/registration"
	"github.com/tabbynet/tabby/node/startup"
)

// register registers the node with its addresses (none with the none
// backend), AS number and Kubernetes node reference, and returns the
// registration configuration to keep it current with.
func register(ctx context.Context, c datastore.Client, cfg startup.Config, getenv func(string) string, log *slog.Logger) (registration.Config, error) {
	rc := registration.Config{NodeName: cfg.NodeName, IPv4: cfg.IP, IPv4Method: cfg.IPMethod, IPv6: cfg.IP6, IPv6Method: cfg.IP6Method}
	if rc.IPv6 == "" {
		rc.IPv6 = "none" // IPv6 is autodetected only when asked for
	}
	if cfg.Backend == startup.BackendNone {
		rc.IPv4, rc.IPv6 = "none", "none" // policy only: no BGP addresses
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return rc, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	env, err := registration.NetlinkEnv(h)
	if err != nil {
		return rc, err
	}
	// Calico: with IP unset, an address the Node already has is kept.
	if rc.IPv4 == "" {
		rc.IPv4 = "autodetect"
		if r, err := c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: cfg.NodeName}); err == nil {
			if bgp := r.(*v3.Node).Spec.BGP; bgp != nil && bgp.IPv4Address != "" {
				rc.IPv4 = bgp.IPv4Address
			}
		} else if !errors.Is(err, datastore.ErrNotFound) {
			return rc, fmt.Errorf("reading node %s: %w", cfg.NodeName, err)
		}
	}
	rc.IPv4 = withPrefixLen(rc.IPv4, env)
	rc.IPv6 = withPrefixLen(rc.IPv6, env)
	if getenv("DISABLE_NODE_IP_CHECK") != "true" {
		rc.Check = conflictCheck(c, cfg.NodeName)
	}
	if _, err := registration.Register(ctx, c, rc, env); err != nil {
		return rc, err
	}
	if err := setNodeExtras(ctx, c, cfg); err != nil {
		return rc, err
	}
	return rc, nil
}

// withPrefixLen gives an explicit address without a prefix length the
// length of the interface address it is (Calico's GetLocalCIDR), else a
// host prefix.
func withPrefixLen(v string, env registration.Env) string {
	a, err := netip.ParseAddr(v)
	if err != nil {
		return v // a CIDR, autodetect or none
	}
	for _, ifc := range env.Interfaces {
		for _, p := range ifc.Addrs {
			if p.Addr() == a {
				return p.String()
			}
		}
	}
	return netip.PrefixFrom(a, a.BitLen()).String()
}

// setNodeExtras records AS and CALICO_K8S_NODE_REF on the Node.
func setNodeExtras(ctx context.Context, c datastore.Client, cfg startup.Config) error {
	for attempt := 0; ; attempt++ {
		r, err := c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: cfg.NodeName})
		if err != nil {
			return fmt.Errorf("reading node %s: %w", cfg.NodeName, err)
		}
		n := r.(*v3.Node)
		before := n.Spec.DeepCopy()
		if cfg.AS != nil && cfg.Backend != startup.BackendNone {
			if n.Spec.BGP == nil {
				n.Spec.BGP = &v3.NodeBGPSpec{}
			}
			as := *cfg.AS
			n.Spec.BGP.ASNumber = &as
		}
		if cfg.K8sNodeRef != "" {
			found := false
			for i, ref := range n.Spec.OrchRefs {
				if strings.EqualFold(ref.Orchestrator, "k8s") {
					n.Spec.OrchRefs[i].NodeName, found = cfg.K8sNodeRef, true
				}
			}
			if !found {
				n.Spec.OrchRefs = append(n.Spec.OrchRefs, v3.OrchRef{Orchestrator: "k8s", NodeName: cfg.K8sNodeRef})
			}
		}
		if reflect.DeepEqual(before, &n.Spec) {
			return nil
		}
		_, err = c.Update(ctx, n)
		if errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("updating node %s: %w", cfg.NodeName, err)
		}
		return nil
	}
}

// keepAddresses says whether an address is autodetected (and so must
// follow the interfaces).
func keepAddresses(cfg startup.Config) bool {
	if cfg.Backend == startup.BackendNone {
		return false
	}
	return cfg.IP == "autodetect" || cfg.IP6 == "autodetect"
}

// keepRegistered re-registers the node whenever an address changes.
func keepRegistered(ctx context.Context, c datastore.Client, rc registration.Config, log *slog.Logger) error {
	nsh, err := netns.Get()
	if err != nil {
		return fmt.Errorf("opening our network namespace: %w", err)
	}
	defer nsh.Close()
	return registration.Keep(ctx, c, rc, nsh, log)
}

// ErrAddressConflict: another Node has the address (Calico refuses to
// start then, unless DISABLE_NODE_IP_CHECK=true).
var ErrAddressConflict = errors.New("address used by another node")

// conflictCheck returns Calico's check that no other Node has the
// addresses chosen for node.
func conflictCheck(c datastore.Client, node string) func(ctx context.Context, v4, v6 string) error {
	return func(ctx context.Context, v4, v6 string) error {
		list, err := c.List(ctx, v3.KindNode, datastore.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing nodes to check for address conflicts: %w", err)
		}
		var errs []error
		for _, it := range list.Items {
			other := it.(*v3.Node)
			if other.Name == node || other.Spec.BGP == nil {
				continue
			}
			for _, pair := range [][2]string{{v4, other.Spec.BGP.IPv4Address}, {v6, other.Spec.BGP.IPv6Address}} {
				if sameAddr(pair[0], pair[1]) {
					errs = append(errs, fmt.Errorf("%w: node %s already uses %s (set DISABLE_NODE_IP_CHECK=true to allow)",
						ErrAddressConflict, other.Name, addrOf(pair[0])))
				}
			}
		}
		return errors.Join(errs...)
	}
}

// addrOf is the address of "a" or "a/len".
func addrOf(s string) string {
	a, _, _ := strings.Cut(s, "/")
	return a
}

func sameAddr(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	x, err1 := netip.ParseAddr(addrOf(a))
	y, err2 := netip.ParseAddr(addrOf(b))
	return err1 == nil && err2 == nil && x == y
}
