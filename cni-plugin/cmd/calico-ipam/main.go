// Command calico-ipam is the Calico IPAM CNI plugin: a thin wrapper that
// reads the network configuration and CNI_ARGS, connects to the datastore
// and runs ipam/cniipam. The `calico` plugin calls cniipam in-process
// instead of executing this binary.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/tabbynet/tabby/cni-plugin/kubepods"
	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/cniipam"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus},
		version.All, "calico-ipam (Tabby)")
}

// timeout bounds one invocation; the runtime may kill us anyway.
const timeout = 60 * time.Second

type env struct {
	conf   *netconf.NetConf
	req    cniipam.Request
	plugin *cniipam.Plugin
	client datastore.Client
	close  func()
}

func load(args *skel.CmdArgs) (*env, error) {
	conf, err := netconf.Parse(args.StdinData)
	if err != nil {
		if ne, ok := err.(*netconf.Error); ok {
			return nil, ne.CNI()
		}
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	ic, err := cniipam.ParseConf(args.StdinData)
	if err != nil {
		return nil, err
	}
	node, err := conf.ResolveNodename(os.Hostname)
	if err != nil {
		if ne, ok := err.(*netconf.Error); ok {
			return nil, ne.CNI()
		}
		return nil, types.NewError(types.ErrInternal, err.Error(), "")
	}
	cargs, err := netconf.ParseArgs(args.Args)
	if err != nil {
		if ne, ok := err.(*netconf.Error); ok {
			return nil, ne.CNI()
		}
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	req := cniipam.Request{
		Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName, Node: node,
		Namespace: string(cargs.K8S_POD_NAMESPACE), Pod: string(cargs.K8S_POD_NAME), Conf: ic,
	}
	if req.IPAddrs, err = ipArgs(args.Args); err != nil {
		return nil, err
	}
	var c datastore.Client
	switch conf.DatastoreType {
	case netconf.DatastoreKubernetes:
		c, err = kdd.New(kdd.Config{Kubeconfig: conf.Kubernetes.Kubeconfig})
	default:
		c, err = dsconfig.Backends{}.New(conf.DatastoreSpec(os.Getenv)) // the hand-written etcd transport
	}
	if err != nil {
		// Connecting is lazy: what fails here is configuration.
		return nil, netconf.DatastoreConfigError(err).CNI()
	}
	var lock struct {
		Path *string `json:"ipam_lock_file"`
	}
	_ = json.Unmarshal(args.StdinData, &lock) // already known to be valid JSON
	lockPath := cniipam.DefaultLockPath
	if lock.Path != nil {
		lockPath = *lock.Path // "" turns the lock off
	}
	// The cache TTL outlives the invocation: settings are read once.
	p := &cniipam.Plugin{Alloc: ipam.New(c, ipam.Config{CacheTTL: 5 * time.Second}), LockPath: lockPath}
	return &env{conf: conf, req: req, plugin: p, client: c, close: func() { c.Close() }}, nil
}

// ipArgs reads IP=<addr>[,<addr>] from CNI_ARGS (how Calico's plugin
// passes the ipAddrs annotation to calico-ipam).
func ipArgs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, kv := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != "IP" || v == "" {
			continue
		}
		for _, a := range strings.Split(v, ",") {
			ip, err := netip.ParseAddr(strings.TrimSpace(a))
			if err != nil {
				return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS IP=%s: %q is not an IP address", v, a), "")
			}
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	e, err := load(args)
	if err != nil {
		return err
	}
	defer e.close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The pod's namespace labels, for pools' namespaceSelectors, as
	// Calico's calico-ipam reads them.
	if e.req.NamespaceLabels, err = kubepods.NamespaceLabels(ctx, e.conf, e.client, e.req.Namespace); err != nil {
		return cniipam.ToCNIError(err)
	}
	res, err := e.plugin.Add(ctx, e.req)
	if err != nil {
		return err
	}
	return types.PrintResult(res, e.conf.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	e, err := load(args)
	if err != nil {
		return err
	}
	defer e.close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return e.plugin.Del(ctx, e.req)
}

func cmdCheck(args *skel.CmdArgs) error {
	e, err := load(args)
	if err != nil {
		return err
	}
	defer e.close()
	var prev *current.Result
	if e.conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&e.conf.PluginConf); err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
		if prev, err = current.NewResultFromResult(e.conf.PrevResult); err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return e.plugin.Check(ctx, e.req, prev)
}

func cmdGC(args *skel.CmdArgs) error {
	e, err := load(args)
	if err != nil {
		return err
	}
	defer e.close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = e.plugin.GC(ctx, e.conf.Name, e.req.Node, e.conf.ValidAttachments)
	return err
}

func cmdStatus(args *skel.CmdArgs) error {
	e, err := load(args)
	if err != nil {
		return err
	}
	defer e.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.plugin.Status(ctx)
}
