//go:build integration

package commands

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/ipam"
)

var (
	guidRE      = regexp.MustCompile(`("clusterGUID": )"[0-9a-f-]{36}"`)
	claimTimeRE = regexp.MustCompile(`("affinity_claim_time": )"[0-9TZ:-]+"`)
)

// TestCLIMigrateEtcdToKubernetes: Calico's datastore migration, end to
// end: resources and IPAM in etcd, lock, export (golden), import into an
// empty Kubernetes datastore, where the same pools, policies, per-node
// configuration (renamed to the Kubernetes node), cluster identity and
// allocations appear; then ipam split of the imported pool while locked,
// and unlock.
func TestCLIMigrateEtcdToKubernetes(t *testing.T) {
	etcd := etcdBackend(t)
	kube := kubeBackend(t)
	tmp := t.TempDir()
	var tr strings.Builder
	run := func(b cliBackend, wantCode int, stdin string, argv ...string) string {
		t.Helper()
		out, code := b.run(t, stdin, argv...)
		if code != wantCode {
			t.Errorf("calicoctl %s: exit %d, want %d\n%s", strings.Join(argv, " "), code, wantCode, out)
		}
		tr.WriteString("[" + b.name + "] " + strings.ReplaceAll(out, tmp, "<tmp>") + "\n")
		return out
	}
	run(etcd, 0, "", args("apply -f testdata/migrate/etcd-data.yaml")...)
	w := newWorld(t, etcd)
	al := ipam.New(w.c, ipam.Config{})
	for i, pod := range []string{"web-1", "web-2"} {
		ip := netip.MustParseAddr("10.70.0." + string(rune('2'+i)))
		if err := al.AssignIP(w.ctx, ipam.AssignIPArgs{IP: ip, HandleID: "k8s-pod-network." + pod, Hostname: "etcd-node-1",
			Attrs: map[string]string{ipam.AttrNode: "etcd-node-1", ipam.AttrNamespace: "default", ipam.AttrPod: pod}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := al.AssignIP(w.ctx, ipam.AssignIPArgs{IP: netip.MustParseAddr("10.70.0.1"), HandleID: "ipip-tunnel-addr-etcd-node-1", Hostname: "etcd-node-1",
		Attrs: map[string]string{ipam.AttrNode: "etcd-node-1", ipam.AttrType: "ipipTunnelAddress"}}); err != nil {
		t.Fatal(err)
	}
	run(etcd, 0, "", args("ipam configure --strictaffinity=true")...)

	run(etcd, 1, "", args("datastore migrate export")...)
	run(etcd, 0, "", args("datastore migrate lock")...)
	run(etcd, 0, "", args("get clusterinformation -o custom-columns=NAME,DATASTOREREADY")...)
	export := run(etcd, 0, "", args("datastore migrate export")...)
	body := strings.SplitN(export, "\n", 3)[2]
	file := filepath.Join(tmp, "etcd-data")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	run(etcd, 1, "", args("datastore migrate import -f "+file)...)
	run(kube, 1, "", args("datastore migrate export")...)
	run(kube, 0, "", args("datastore migrate import -f "+file)...)
	run(kube, 1, "", args("datastore migrate import -f "+file)...)
	run(kube, 0, "", args("get ippools -o wide")...)
	run(kube, 0, "", args("get felixconfigurations")...)
	run(kube, 0, "", args("get bgpconfig")...)
	run(kube, 0, "", args("get gnp -o wide")...)
	run(kube, 0, "", args("get networksets -A")...)
	run(kube, 0, "", args("ipam show --show-blocks")...)
	run(kube, 0, "", args("ipam show --ip=10.70.0.2")...)
	run(kube, 0, "", args("ipam show --show-configuration")...)
	run(kube, 0, "", args("get clusterinformation -o custom-columns=NAME,DATASTOREREADY")...)
	// Split the imported pool while still locked.
	run(kube, 1, "", args("ipam split 3 --name mig-pool")...)
	run(kube, 1, "", args("ipam split 2")...)
	run(kube, 0, "", args("ipam split 2 --cidr 10.70.0.0/24")...)
	run(kube, 0, "", args("get ippools -o wide")...)
	run(kube, 0, "", args("ipam show --show-blocks")...)
	run(kube, 0, "", args("datastore migrate unlock")...)
	run(kube, 1, "", args("ipam split 2 --name split-mig-pool-0")...)

	// The cluster keeps its identity.
	eci, err := getClusterInfo(w.ctx, w.c)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := dsconfig.Load("/nonexistent", false, func(k string) string { return kube.env[k] })
	kc, err := kdd.FromSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	kci, err := getClusterInfo(w.ctx, kc)
	if err != nil {
		t.Fatal(err)
	}
	if eci.Spec.ClusterGUID == "" || kci.Spec.ClusterGUID != eci.Spec.ClusterGUID {
		t.Errorf("cluster GUID %q after import, want etcd's %q", kci.Spec.ClusterGUID, eci.Spec.ClusterGUID)
	}
	if _, err := kc.Get(w.ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: "node.k8s-node-1"}); err != nil {
		t.Errorf("per-node FelixConfiguration not renamed to the Kubernetes node: %v", err)
	}
	got := normaliseGUID(tr.String())
	checkGolden(t, "migrate", got)
	if !bytes.Contains([]byte(body), []byte(`"Key": "/calico/ipam/v2/host/k8s-node-1/ipv4/block/10.70.0.0-28"`)) {
		t.Errorf("export's block affinity not renamed to the Kubernetes node:\n%s", body)
	}
	// The tunnel address's handle follows its node's new name.
	if _, err := kc.Get(w.ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: ipam.HandleName("ipip-tunnel-addr-k8s-node-1")}); err != nil {
		t.Errorf("tunnel handle not renamed: %v", err)
	}
}

func normaliseGUID(s string) string {
	return claimTimeRE.ReplaceAllString(guidRE.ReplaceAllString(s, `$1"<guid>"`), `$1"<time>"`)
}
