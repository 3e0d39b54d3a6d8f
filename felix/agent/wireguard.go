package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/wireguard"
)

// wgClientOpener opens wgctrl clients bound to the namespace felix
// programs (a generic netlink socket belongs to the namespace it was
// opened in) and closes them when felix stops.
type wgClientOpener struct {
	netnsPath string
	mu        sync.Mutex
	open      []*wgctrl.Client
}

func (o *wgClientOpener) New() (wireguard.Client, error) {
	var c *wgctrl.Client
	var err error
	if o.netnsPath == "" {
		c, err = wgctrl.New()
	} else {
		err = ns.WithNetNSPath(o.netnsPath, func(ns.NetNS) error {
			c, err = wgctrl.New()
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.open = append(o.open, c)
	o.mu.Unlock()
	return c, nil
}

func (o *wgClientOpener) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.open {
		_ = c.Close()
	}
	o.open = nil
}

// keyPublisher writes this node's WireGuard public keys to its Node's
// status (wireguardPublicKey, wireguardPublicKeyV6), as Calico's felix
// does: the key of the device, or "" when WireGuard is off or the kernel
// has none. Set is called from the route manager's goroutine and never
// blocks; Run writes, retrying conflicts at once and other failures
// after a pause.
type keyPublisher struct {
	client datastore.Client
	node   string
	log    *slog.Logger
	kick   chan struct{}

	mu        sync.Mutex
	want      [2]string
	published [2]*string
}

func newKeyPublisher(c datastore.Client, node string, log *slog.Logger) *keyPublisher {
	return &keyPublisher{client: c, node: node, log: log, kick: make(chan struct{}, 1)}
}

// Set records the device's key of one IP version (zero: none).
func (p *keyPublisher) Set(v6 bool, k wgtypes.Key) {
	s := ""
	if k != (wgtypes.Key{}) {
		s = k.String()
	}
	i := map[bool]int{false: 0, true: 1}[v6]
	p.mu.Lock()
	changed := p.published[i] == nil || *p.published[i] != s
	p.want[i] = s
	p.mu.Unlock()
	if changed {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// Run publishes until ctx ends.
func (p *keyPublisher) Run(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-retry:
		}
		retry = nil
		if err := p.publish(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("publishing the WireGuard public key on the Node; retrying", "node", p.node, "error", err)
			retry = time.After(2 * time.Second)
		}
	}
}

// publish writes the wanted keys the Node does not hold (compare and
// swap, re-read on conflict).
func (p *keyPublisher) publish(ctx context.Context) error {
	for attempt := 0; attempt < 5; attempt++ {
		p.mu.Lock()
		want := p.want
		p.mu.Unlock()
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := p.client.Get(gctx, datastore.Key{Kind: v3.KindNode, Name: p.node})
		cancel()
		if errors.Is(err, datastore.ErrNotFound) && want == [2]string{} {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading Node %s: %w", p.node, err)
		}
		n := r.(*v3.Node).DeepCopy()
		if n.Status == nil {
			n.Status = &v3.NodeStatus{}
		}
		if n.Status.WireguardPublicKey == want[0] && n.Status.WireguardPublicKeyV6 == want[1] {
			p.done(want)
			return nil
		}
		n.Status.WireguardPublicKey, n.Status.WireguardPublicKeyV6 = want[0], want[1]
		uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = p.client.Update(uctx, n)
		cancel()
		if errors.Is(err, datastore.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("updating Node %s: %w", p.node, err)
		}
		p.log.Info("published the WireGuard public keys on the Node", "node", p.node, "ipv4", want[0], "ipv6", want[1])
		p.done(want)
		return nil
	}
	return fmt.Errorf("updating Node %s: %w (5 times)", p.node, datastore.ErrConflict)
}

func (p *keyPublisher) done(keys [2]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range keys {
		k := keys[i]
		p.published[i] = &k
	}
	if p.want != keys {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}
