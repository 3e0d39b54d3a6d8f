package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/wiring"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// Del removes the pod's network. Everything already gone is success, so
// DEL can be repeated. It removes only what is this attachment's: the
// WorkloadEndpoint if it still names this container (a late DEL must not
// delete a newer sandbox's record), the host veth if it carries this
// attachment's mark (see wiring.Teardown), and the addresses of its IPAM
// handle, released only once the endpoint is gone.
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
	ctx, cancel := p.ctx()
	defer cancel()
	tm := newPhaseTimer("DEL")
	defer tm.done()
	client, err := p.NewClient(c.conf)
	if err != nil {
		return err
	}
	defer client.Close()

	// The kernel takes the longest (removing the veth): start it, and
	// remove the endpoint and then the addresses meanwhile.
	tdErr := make(chan error, 1)
	var tdTook time.Duration
	go func() {
		t0 := time.Now()
		err := wiring.Teardown(hostNS, c.id.hostIf, c.id.handle, a.Netns)
		tdTook = time.Since(t0)
		tdErr <- err
	}()
	err = p.removeEndpoint(ctx, client, c, a)
	tm.mark("endpoint")
	if err == nil {
		err = p.release(ctx, c, a, ipam.New(client, ipam.Config{}))
		tm.mark("release")
	}
	terr := <-tdErr
	tm.note("veth", tdTook)
	return errors.Join(err, terr)
}

// delEndpoint removes the endpoint record and the veth if they still
// belong to this container (an ADD's rollback).
func (p *Plugin) delEndpoint(ctx context.Context, client datastore.Client, hostNS ns.NetNS, c *call, a *skel.CmdArgs) error {
	return errors.Join(
		wiring.Teardown(hostNS, c.id.hostIf, c.id.handle, a.Netns),
		p.removeEndpoint(ctx, client, c, a))
}

// removeEndpoint removes the WorkloadEndpoint record (or, in Kubernetes
// mode, blanks the pod's annotations) if it still belongs to this
// container. The record is found by its name, or, when the node has been
// renamed since the ADD, by its container and interface; an error means
// it may still be there, and the addresses must then be kept.
func (p *Plugin) removeEndpoint(ctx context.Context, client datastore.Client, c *call, a *skel.CmdArgs) error {
	if c.idErr != nil {
		// No ADD ever got past this identity: there is no record.
		return nil
	}
	if pods, ok := p.pods(client, c); ok {
		// Kubernetes mode: the pod's annotations say which sandbox owns
		// the pod's network now.
		return pods.Release(ctx, c.id.namespace, c.id.pod, a.ContainerID)
	}
	key := datastore.Key{Kind: v3.KindWorkloadEndpoint, Namespace: c.id.namespace, Name: c.id.wepName}
	cur, err := client.Get(ctx, key)
	var bad datastore.BadRecord
	if errors.As(err, &bad) {
		// The record cannot say whose it is, and nothing can use it:
		// delete it (exactly that revision); the addresses go by this
		// container's handle.
		_, derr := client.Delete(ctx, key, datastore.DeleteOptions{ResourceVersion: bad.Revision})
		if errors.Is(derr, datastore.ErrNotFound) || errors.Is(derr, datastore.ErrConflict) {
			derr = nil
		}
		return derr
	}
	if errors.Is(err, datastore.ErrNotFound) {
		cur, err = p.findEndpoint(ctx, client, c, a)
	}
	if err != nil {
		return err
	}
	if cur == nil || cur.(*v3.WorkloadEndpoint).Spec.ContainerID != a.ContainerID {
		// Gone, or a newer sandbox owns the name.
		return nil
	}
	_, err = client.Delete(ctx, datastore.KeyOf(cur), datastore.DeleteOptions{ResourceVersion: cur.GetResourceVersion()})
	if errors.Is(err, datastore.ErrNotFound) || errors.Is(err, datastore.ErrConflict) {
		err = nil
	}
	return err
}

// findEndpoint looks for this container's endpoint under any node name
// (nil when there is none).
func (p *Plugin) findEndpoint(ctx context.Context, client datastore.Client, c *call, a *skel.CmdArgs) (v3.Resource, error) {
	l, err := client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: c.id.namespace})
	if err != nil {
		return nil, fmt.Errorf("looking for the WorkloadEndpoint of container %s: %w", a.ContainerID, err)
	}
	for _, o := range l.Items {
		w := o.(*v3.WorkloadEndpoint)
		if w.Spec.ContainerID == a.ContainerID && w.Spec.Endpoint == a.IfName && w.Spec.Orchestrator == c.id.orchestrator {
			return w, nil
		}
	}
	return nil, nil
}
