package daemon_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

// reportHarness is a daemon and a dataplane over the fake kernel, driven
// one step at a time (Recompute, Apply), with the endpoint report.
type reportHarness struct {
	k   *fake.Kernel
	d   *daemon.Daemon
	dp  *dataplane.Dataplane
	rep *daemon.Reporter
}

func newReportHarness() *reportHarness {
	h := &reportHarness{k: fake.NewKernel(), rep: daemon.NewReporter(ct.Node)}
	log := slog.New(slog.DiscardHandler)
	h.dp = dataplane.New(dataplane.Config{Runner: h.k, V4: dataplane.BackendDefaultV4, Logger: log, OnProgrammed: h.rep.Applied})
	h.d = daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: h.dp, Logger: log, Report: h.rep})
	return h
}

// report is the report as served (JSON over HTTP).
func (h *reportHarness) report(t *testing.T) daemon.Report {
	t.Helper()
	w := httptest.NewRecorder()
	h.rep.ServeHTTP(w, httptest.NewRequest("GET", daemon.EndpointReportPath, nil))
	var r daemon.Report
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatalf("report %s: %v", w.Body.String(), err)
	}
	return r
}

func versioned(objs []any) []any {
	for i, o := range objs {
		o.(v3.Resource).SetResourceVersion(strconv.Itoa(100 + i))
	}
	return objs
}

var hashComment = regexp.MustCompile(`cali:([A-Za-z0-9_-]{16})`)

// kernelHashes are chain's rule hashes in the fake kernel's filter table.
func kernelHashes(k *fake.Kernel, chain string) []string {
	out := []string{}
	for _, r := range k.Rules(4, chain) {
		if m := hashComment.FindStringSubmatch(r); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

func policyVersion(r daemon.Report, kind, ns, name string) string {
	for _, p := range r.Resources {
		if p.Kind == kind && p.Namespace == ns && p.Name == name {
			return p.ResourceVersion
		}
	}
	return ""
}

// dbIngress is the report's ingress policy of prod/db named name.
func dbIngress(t *testing.T, r daemon.Report, name string) daemon.PolicyReport {
	t.Helper()
	for _, ep := range r.Endpoints {
		if ep.Interface != "cali2222" {
			continue
		}
		for _, tier := range ep.Ingress {
			for _, p := range tier.Policies {
				if p.Name == name {
					return p
				}
			}
		}
	}
	t.Fatalf("no ingress policy %s on prod/db in %+v", name, r.Endpoints)
	return daemon.PolicyReport{}
}

// TestEndpointReportIsWhatIsProgrammed: the report lists each local
// endpoint's policies in order with the rule hashes the kernel holds,
// only once the dataplane applied them; policies that apply to no local
// endpoint are listed with their version without a new apply; a chain
// the kernel refuses shows programmed false.
func TestEndpointReportIsWhatIsProgrammed(t *testing.T) {
	h := newReportHarness()
	ctx := context.Background()
	h.d.OnStatusUpdated(datastore.StatusInSync)
	h.d.OnUpdates(updates(versioned(ct.Scenario())...))
	h.d.Recompute()
	if r := h.report(t); len(r.Endpoints) != 0 || len(r.Resources) != 0 || r.Generation != 0 {
		t.Fatalf("report before any apply: %+v", r)
	}
	if _, err := h.dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	r := h.report(t)
	if r.Node != ct.Node || r.Generation != 1 {
		t.Errorf("node %q generation %d, want %s and 1", r.Node, r.Generation, ct.Node)
	}
	var tiers []string
	for _, ep := range r.Endpoints {
		if ep.Interface != "cali2222" {
			continue
		}
		for _, tier := range ep.Ingress {
			for _, p := range tier.Policies {
				tiers = append(tiers, tier.Tier+"/"+p.Name)
			}
		}
		for _, c := range ep.Chains {
			if !c.Programmed || len(c.RuleHashes) == 0 {
				t.Errorf("endpoint chain %+v not programmed", c)
			}
		}
	}
	want := []string{"security/security.deny-blocked", "security/security.pass-prod", "platform/platform.log-icmp", "default/db-from-sa"}
	if !slices.Equal(tiers, want) {
		t.Errorf("prod/db's ingress policies %v, want %v", tiers, want)
	}
	db := dbIngress(t, r, "db-from-sa")
	if got := kernelHashes(h.k, db.Chain); !db.Programmed || db.Table != "filter" || !slices.Equal(db.RuleHashes, got) || len(got) == 0 {
		t.Errorf("db-from-sa: %+v, kernel's hashes %v", db, got)
	}
	remote := policyVersion(r, v3.KindNetworkPolicy, "prod", "remote-only")
	if remote == "" || policyVersion(r, v3.KindGlobalNetworkPolicy, "", "allow-kubelet") == "" {
		t.Fatalf("resources %+v: want remote-only (selects nothing here) and allow-kubelet listed", r.Resources)
	}

	// A policy that applies to no local endpoint: no rules change, its
	// new version is in the report at once.
	var rem, dbPol *v3.NetworkPolicy
	for _, o := range ct.Scenario() {
		if p, ok := o.(*v3.NetworkPolicy); ok && p.Name == "remote-only" {
			rem = p
		} else if ok && p.Name == "db-from-sa" {
			dbPol = p
		}
	}
	rem.ResourceVersion = "500"
	h.d.OnUpdates(updates(rem))
	h.d.Recompute()
	if got := policyVersion(h.report(t), v3.KindNetworkPolicy, "prod", "remote-only"); got != "500" {
		t.Errorf("remote-only at %q after an edit that changes no rules, want 500", got)
	}

	// An edit of a policy that applies here: the old version and hashes
	// until the dataplane applied the new ones.
	dbPol.ResourceVersion = "501"
	dbPol.Spec.Ingress = dbPol.Spec.Ingress[:1]
	h.d.OnUpdates(updates(dbPol))
	h.d.Recompute()
	if got := h.report(t); policyVersion(got, v3.KindNetworkPolicy, "prod", "db-from-sa") == "501" || !slices.Equal(dbIngress(t, got, "db-from-sa").RuleHashes, db.RuleHashes) {
		t.Errorf("report before the edit was applied: %+v", dbIngress(t, got, "db-from-sa"))
	}
	if _, err := h.dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	got := h.report(t)
	edited := dbIngress(t, got, "db-from-sa")
	if policyVersion(got, v3.KindNetworkPolicy, "prod", "db-from-sa") != "501" || !edited.Programmed ||
		slices.Equal(edited.RuleHashes, db.RuleHashes) || !slices.Equal(edited.RuleHashes, kernelHashes(h.k, edited.Chain)) {
		t.Errorf("after the edit was applied: %+v (version %s), kernel %v", edited, policyVersion(got, v3.KindNetworkPolicy, "prod", "db-from-sa"),
			kernelHashes(h.k, edited.Chain))
	}

	// A rule the kernel refuses: the chain is not what felix rendered.
	dbPol = dbPol.DeepCopyObject().(*v3.NetworkPolicy)
	dbPol.ResourceVersion = "502"
	dbPol.Spec.Ingress = append(dbPol.Spec.Ingress, v3.Rule{Action: v3.Allow, Protocol: ct.Proto("UDP")})
	h.k.BreakRule("-p udp", true)
	h.d.OnUpdates(updates(dbPol))
	h.d.Recompute()
	if _, err := h.dp.Apply(ctx); err == nil {
		t.Fatal("apply with a refused rule succeeded")
	}
	if p := dbIngress(t, h.report(t), "db-from-sa"); p.Programmed {
		t.Errorf("a chain the kernel refused reported programmed: %+v", p)
	}
}
