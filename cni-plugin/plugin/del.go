package plugin

import (
	"context"
	"errors"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/wiring"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// Del removes the pod's network. Everything already gone is success, so
// DEL can be repeated; the WorkloadEndpoint is removed only if it still
// belongs to this container (a late DEL must not delete a newer pod's
// record).
func (p *Plugin) Del(a *skel.CmdArgs) error {
	if err := p.del(a); err != nil {
		return toCNI(err, "deleting the pod network")
	}
	return nil
}

func (p *Plugin) del(a *skel.CmdArgs) error {
	c, err := p.parse(a)
	if err != nil {
		return err
	}
	hostNS, err := p.HostNS()
	if err != nil {
		return err
	}
	defer hostNS.Close()
	// Only tear down the veth if it is ours: a newer sandbox of the same
	// pod reuses the name, and its WorkloadEndpoint says whose it is.
	ctx, cancel := p.ctx()
	defer cancel()
	tm := newPhaseTimer("DEL")
	defer tm.done()
	client, err := p.NewClient(c.conf)
	if err != nil {
		return err
	}
	defer client.Close()

	// The addresses are this container's whoever owns the pod's name now:
	// release them while the endpoint and veth are dealt with.
	relErr := make(chan error, 1)
	var relTook time.Duration
	go func() {
		t0 := time.Now()
		err := p.release(ctx, c, a, ipam.New(client, ipam.Config{}))
		relTook = time.Since(t0)
		relErr <- err
	}()
	err = p.delEndpoint(ctx, client, hostNS, c, a)
	tm.mark("endpoint+veth")
	rerr := <-relErr
	tm.note("release", relTook)
	if err != nil {
		return err
	}
	return rerr
}

// delEndpoint removes the WorkloadEndpoint record (or, in Kubernetes mode,
// blanks the pod's annotations) and the veth, if they still belong to this
// container.
func (p *Plugin) delEndpoint(ctx context.Context, client datastore.Client, hostNS ns.NetNS, c *call, a *skel.CmdArgs) error {
	if pods, ok := p.pods(client, c); ok {
		// Kubernetes mode: the pod's annotations say which sandbox owns
		// the pod's network now.
		owner, err := pods.Owner(ctx, c.id.namespace, c.id.pod)
		if err != nil {
			return err
		}
		if owner == "" || owner == a.ContainerID {
			if err := wiring.Teardown(hostNS, c.id.hostIf, a.Netns, a.IfName); err != nil {
				return err
			}
			if err := pods.Release(ctx, c.id.namespace, c.id.pod, a.ContainerID); err != nil {
				return err
			}
		}
		return nil
	}

	key := datastore.Key{Kind: v3.KindWorkloadEndpoint, Namespace: c.id.namespace, Name: c.id.wepName}
	cur, err := client.Get(ctx, key)
	var bad datastore.BadRecord
	switch {
	case err == nil && cur.(*v3.WorkloadEndpoint).Spec.ContainerID != a.ContainerID:
		// A newer sandbox owns the name and the veth: release only our
		// addresses.
	case err == nil:
		// Ours: remove the record while the kernel removes the veth (a
		// repeated DEL finds no record and removes whatever is left).
		delErr := make(chan error, 1)
		go func() {
			_, err := client.Delete(ctx, key, datastore.DeleteOptions{ResourceVersion: cur.GetResourceVersion()})
			if errors.Is(err, datastore.ErrNotFound) || errors.Is(err, datastore.ErrConflict) {
				err = nil
			}
			delErr <- err
		}()
		tdErr := wiring.Teardown(hostNS, c.id.hostIf, a.Netns, a.IfName)
		if err := errors.Join(tdErr, <-delErr); err != nil {
			return err
		}
	case errors.Is(err, datastore.ErrNotFound):
		if err := wiring.Teardown(hostNS, c.id.hostIf, a.Netns, a.IfName); err != nil {
			return err
		}
	case errors.As(err, &bad):
		// The record cannot say whose it is, and nothing can use it:
		// delete it (exactly that revision) and tear down as for a
		// missing record; the addresses go by this container's handle.
		_, derr := client.Delete(ctx, key, datastore.DeleteOptions{ResourceVersion: bad.Revision})
		if errors.Is(derr, datastore.ErrNotFound) || errors.Is(derr, datastore.ErrConflict) {
			derr = nil
		}
		if err := errors.Join(wiring.Teardown(hostNS, c.id.hostIf, a.Netns, a.IfName), derr); err != nil {
			return err
		}
	default:
		return err
	}
	return nil
}
