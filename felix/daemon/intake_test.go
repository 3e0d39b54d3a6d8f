package daemon

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestIntake: before the snapshot is complete only the calculation's
// changes are handed out (pools, nodes, configuration and addresses
// wait); the first complete take reads the cluster and configuration even
// when none came; afterwards each is handed out only when it changed;
// IPAM blocks and other nodes' FelixConfigurations do not concern the
// calculation; the latest change per key wins.
func TestIntake(t *testing.T) {
	in := newIntake()
	up := func(typ datastore.EventType, r v3.Resource) datastore.Update {
		return datastore.Update{Type: typ, Key: datastore.KeyOf(r), Object: r}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: meta("p"), Spec: v3.IPPoolSpec{CIDR: "10.0.0.0/16"}}
	prof := &v3.Profile{TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile}, ObjectMeta: meta("prof")}
	block := &v3.IPAMBlock{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPAMBlock}, ObjectMeta: meta("b")}
	other := &v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration}, ObjectMeta: meta("node.other")}

	if in.add([]datastore.Update{up(datastore.EventAdded, block), up(datastore.EventAdded, other)}, "me") {
		t.Error("an IPAM block and another node's configuration concern the calculation")
	}
	if !in.add([]datastore.Update{up(datastore.EventAdded, pool), up(datastore.EventAdded, prof), up(datastore.EventDeleted, prof)}, "me") {
		t.Error("a pool and a profile do concern it")
	}
	in.sizes[v3.KindProfile] = 1
	in.ifaces, in.ifacesChanged = map[string][]netip.Addr{"eth0": nil}, true

	got, ok := in.take(false)
	if ok || got.clusterChanged || got.configChanged || got.ifacesChanged || len(got.changes) != 1 || got.sizes[v3.KindProfile] != 1 {
		t.Fatalf("before the snapshot: %+v, %v; want only the one change and the sizes", got, ok)
	}
	if c := got.changes[datastore.KeyOf(prof)]; !c.deleted {
		t.Errorf("the profile's latest change is %+v, want its deletion", c)
	}
	got, ok = in.take(true)
	if !ok || !got.clusterChanged || len(got.pools) != 1 || len(got.nodes) != 0 || !got.configChanged || !got.ifacesChanged || len(got.changes) != 0 {
		t.Fatalf("first complete take: %+v, %v; want the cluster, configuration and addresses", got, ok)
	}
	got, _ = in.take(true)
	if got.clusterChanged || got.configChanged || got.ifacesChanged || got.changes != nil {
		t.Fatalf("nothing new: %+v", got)
	}
	def := &v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration}, ObjectMeta: meta("default")}
	in.add([]datastore.Update{up(datastore.EventAdded, def)}, "me")
	if got, _ = in.take(true); !got.configChanged || got.global == nil || got.clusterChanged {
		t.Fatalf("after the default configuration: %+v", got)
	}
}
