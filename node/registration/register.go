package registration

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Config says how to register a node.
type Config struct {
	NodeName string
	// IPv4 is the node's IPv4 address with prefix length (Calico's IP),
	// "autodetect" (also "") to use IPv4Method, or "none".
	IPv4       string
	IPv4Method string
	// IPv6 / IPv6Method likewise; IPv6 "" means none (Calico's default).
	IPv6       string
	IPv6Method string
	// Check, when set, vets the chosen addresses ("" for none) before
	// anything is written; its error fails Register (calico-node's check
	// that no other Node uses them).
	Check func(ctx context.Context, v4, v6 string) error
}

// Register chooses the node's addresses and creates or updates its Node
// resource with them (spec.bgp.ipv4Address / ipv6Address). It fails,
// naming the method, when autodetection finds nothing.
func Register(ctx context.Context, c datastore.Client, cfg Config, env Env) (*v3.Node, error) {
	v4, err := choose(cfg.IPv4, cfg.IPv4Method, 4, env, "autodetect")
	if err != nil {
		return nil, err
	}
	v6, err := choose(cfg.IPv6, cfg.IPv6Method, 6, env, "none")
	if err != nil {
		return nil, err
	}
	if cfg.Check != nil {
		if err := cfg.Check(ctx, v4, v6); err != nil {
			return nil, err
		}
	}
	apply := func(n *v3.Node) {
		if v4 == "" && v6 == "" {
			return
		}
		if n.Spec.BGP == nil {
			n.Spec.BGP = &v3.NodeBGPSpec{}
		}
		if v4 != "" {
			n.Spec.BGP.IPv4Address = v4
		}
		if v6 != "" {
			n.Spec.BGP.IPv6Address = v6
		}
	}
	for attempt := 0; ; attempt++ {
		cur, err := c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: cfg.NodeName})
		if errors.Is(err, datastore.ErrNotFound) {
			n := &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode}, ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName}}
			apply(n)
			out, err := c.Create(ctx, n)
			if errors.Is(err, datastore.ErrAlreadyExists) && attempt < 5 {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("creating node %s: %w", cfg.NodeName, err)
			}
			return out.(*v3.Node), nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", cfg.NodeName, err)
		}
		n := cur.(*v3.Node)
		before := n.DeepCopy()
		apply(n)
		if equalNodeSpec(before, n) {
			return n, nil
		}
		out, err := c.Update(ctx, n)
		if errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("updating node %s: %w", cfg.NodeName, err)
		}
		return out.(*v3.Node), nil
	}
}

func choose(explicit, method string, version int, env Env, dflt string) (string, error) {
	if explicit == "" {
		explicit = dflt
	}
	switch explicit {
	case "none":
		return "", nil
	case "autodetect":
		p, err := Autodetect(method, version, env)
		if err != nil {
			return "", err
		}
		return p.String(), nil
	}
	return explicit, nil
}

func equalNodeSpec(a, b *v3.Node) bool { return reflect.DeepEqual(a.Spec, b.Spec) }
