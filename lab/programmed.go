package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"k8s.io/apimachinery/pkg/api/equality"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/daemon"
)

// How apply knows every node runs what it wrote: each node's felix
// reports what it has programmed (its endpoint report, served by
// calico-node on the node's health port, felix/daemon.Report): for each
// local endpoint the policies that apply to it and whether each chain in
// the kernel holds exactly what felix rendered, and the resources (all
// but WorkloadEndpoints) that programmed state was computed from, each at
// the version felix read. A resource the apply wrote at version V is in
// place on a node once the node's report lists it at V or later (deleted:
// no longer lists it) and every chain of the policies it lists on an
// endpoint, and that endpoint's own chains, are programmed. Which
// endpoints a policy selects is felix's business: service accounts, host
// endpoints, labels changed live with calicoctl label all count, and the
// lab never re-derives selection itself.

// PolicyRef is a resource an apply or delete wrote, as felix reads it.
type PolicyRef struct {
	// Kind is the Calico kind felix reads (a Kubernetes NetworkPolicy is
	// the NetworkPolicy knp.default.<name>).
	Kind, Namespace, Name string
	Deleted               bool
	// Version is the resourceVersion written (read back after the
	// write); empty for a delete.
	Version string
	// synced, when set, is the spec (v3.NetworkPolicySpec or
	// v3.GlobalNetworkPolicySpec) kube-controllers stores the policy with
	// (State.KubeControllers on etcd): read back waits for it.
	synced any
}

func (r PolicyRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func (r PolicyRef) key() datastore.Key {
	return datastore.Key{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// isPolicy says whether felix renders the kind into policy chains.
func (r PolicyRef) isPolicy() bool {
	return r.Kind == v3.KindNetworkPolicy || r.Kind == v3.KindGlobalNetworkPolicy
}

// reportKinds are the kinds felix's report lists versions of: the
// calculation's, but WorkloadEndpoints.
var reportKinds = []string{v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy, v3.KindHostEndpoint, v3.KindTier,
	v3.KindProfile, v3.KindNetworkSet, v3.KindGlobalNetworkSet}

// readBack fills in the version of each resource written (nothing for a
// delete), as felix will read it. A policy kube-controllers stores is
// read once it holds what was written (up to syncTimeout).
func (l *Lab) readBack(ctx context.Context, refs []PolicyRef) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	for i := range refs {
		if refs[i].Deleted {
			continue
		}
		deadline := time.Now().Add(syncTimeout)
		for {
			o, err := c.Get(ctx, refs[i].key())
			if err == nil && refs[i].synced != nil && !equality.Semantic.DeepEqual(policySpec(o), refs[i].synced) {
				err = errors.New("kube-controllers has not stored it as written yet")
			}
			if err == nil {
				refs[i].Version = o.GetResourceVersion()
				break
			}
			if refs[i].synced == nil || time.Now().After(deadline) {
				return fmt.Errorf("reading %s back: %w", refs[i], err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// policySpec is a policy's spec (nil for other kinds).
func policySpec(o v3.Resource) any {
	switch p := o.(type) {
	case *v3.NetworkPolicy:
		return p.Spec
	case *v3.GlobalNetworkPolicy:
		return p.Spec
	}
	return nil
}

// syncTimeout bounds the wait for kube-controllers to store a policy.
const syncTimeout = 30 * time.Second

// WaitProgrammed waits until every node's felix reports the resources
// written (refs) programmed, or gone once deleted (see above). After
// timeout it names the nodes that lag and why (a node whose felix does
// not answer, e.g. paused, is named as such).
func (l *Lab) WaitProgrammed(ctx context.Context, refs []PolicyRef, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		lag := map[string]string{}
		_ = parallel(len(l.State.Nodes), func(i int) error {
			n := l.State.Nodes[i]
			var why string
			rep, err := fetchReport(ctx, n)
			if err != nil {
				why = err.Error()
			} else {
				why = reportLags(rep, refs)
			}
			if why != "" {
				l.mu.Lock()
				lag[n.Name] = why
				l.mu.Unlock()
			}
			return nil
		})
		if len(lag) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var names []string
			for n, why := range lag {
				names = append(names, n+" ("+why+")")
			}
			sort.Strings(names)
			return fmt.Errorf("not programmed within %s on: %s", timeout, strings.Join(names, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reportLags says what of refs node's report does not show programmed
// ("" when all is).
func reportLags(rep *daemon.Report, refs []PolicyRef) string {
	read := map[datastore.Key]string{}
	for _, r := range rep.Resources {
		read[datastore.Key{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}] = r.ResourceVersion
	}
	var why []string
	for _, r := range refs {
		v, listed := read[r.key()]
		switch {
		case r.Deleted && listed:
			why = append(why, fmt.Sprintf("still has %s (version %s)", r, v))
		case !r.Deleted && !listed:
			why = append(why, fmt.Sprintf("has not read %s yet", r))
		case !r.Deleted && !versionAtLeast(v, r.Version):
			why = append(why, fmt.Sprintf("has %s at version %s, not yet %s", r, v, r.Version))
		}
	}
	for _, ep := range rep.Endpoints {
		for _, r := range refs {
			if !r.isPolicy() {
				continue
			}
			for _, c := range endpointPolicyChains(ep, r) {
				if r.Deleted {
					why = append(why, fmt.Sprintf("endpoint %s still has %s", ep.Key, r))
					break
				}
				if !c.Programmed {
					why = append(why, fmt.Sprintf("endpoint %s: chain %s of %s not programmed (%d rules)", ep.Key, c.Chain, r, len(c.RuleHashes)))
				}
			}
		}
	}
	return strings.Join(why, "; ")
}

// endpointPolicyChains are the chains of policy r on endpoint ep (none
// when r does not apply to it) and, when there are any, the endpoint's
// own chains (which jump to them).
func endpointPolicyChains(ep daemon.EndpointReport, r PolicyRef) []daemon.ChainReport {
	var out []daemon.ChainReport
	for _, dir := range [][]daemon.TierReport{ep.Ingress, ep.Egress, ep.ForwardIngress, ep.ForwardEgress,
		ep.PreDNATIngress, ep.UntrackedIngress, ep.UntrackedEgress} {
		for _, t := range dir {
			for _, p := range t.Policies {
				if p.Name == r.Name && p.Namespace == r.Namespace && (p.Namespace != "") == (r.Kind == v3.KindNetworkPolicy) {
					out = append(out, p.ChainReport)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return append(out, ep.Chains...)
}

// versionAtLeast says whether resourceVersion got is want or later
// (etcd revisions and Kubernetes resourceVersions are numbers that grow;
// anything else must be equal).
func versionAtLeast(got, want string) bool {
	g, err1 := strconv.ParseUint(got, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return got == want
	}
	return g >= w
}

// reportTimeout bounds one request for a node's report: a felix that
// does not answer within it (paused, hung) is named.
const reportTimeout = 2 * time.Second

// nodeHTTPClient is an HTTP client whose connections are made inside
// node n's network namespace (its loopback is the node's own); close
// the namespace handle returned when done.
func nodeHTTPClient(n NodeState, timeout time.Duration) (*http.Client, ns.NetNS, error) {
	netns, err := ns.GetNS(netnsPath(n.Netns))
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			// The socket is made in the node's namespace (and stays
			// there), on a thread of its own.
			derr := netns.Do(func(ns.NetNS) error {
				var d net.Dialer
				c, err = d.DialContext(ctx, network, addr)
				return nil
			})
			return c, errors.Join(err, derr)
		}}}, netns, nil
}

// fetchReport reads node n's felix endpoint report from calico-node's
// health port inside the node's namespace.
func fetchReport(ctx context.Context, n NodeState) (*daemon.Report, error) {
	if n.VM != nil {
		return n.VM.fetchReport()
	}
	client, netns, err := nodeHTTPClient(n, reportTimeout)
	if err != nil {
		return nil, err
	}
	defer netns.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+healthAddr+daemon.EndpointReportPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Timeout") {
			return nil, fmt.Errorf("felix's endpoint report: no answer within %s (calico-node paused or hung?)", reportTimeout)
		}
		return nil, fmt.Errorf("felix's endpoint report: %w (calico-node not running?)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("felix's endpoint report: %s (felix not started yet?)", resp.Status)
	}
	var rep daemon.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return nil, fmt.Errorf("felix's endpoint report: %w", err)
	}
	return &rep, nil
}

// Report is node's felix endpoint report (see above).
func (l *Lab) Report(ctx context.Context, node string) (*daemon.Report, error) {
	for _, n := range l.State.Nodes {
		if n.Name == node {
			return fetchReport(ctx, n)
		}
	}
	return nil, fmt.Errorf("no node %q in the lab (see tabby-lab status)", node)
}

// Get writes the body of an HTTP GET of url to w; an answer other than
// 200 is an error.
func Get(ctx context.Context, url string, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
