//go:build integration

package ipam

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tabbynet/tabby/internal/testservers"
)

// calicoKeyRE is every key libcalico-go's backend model writes under
// /calico/ipam/v2/.
var calicoKeyRE = regexp.MustCompile(`^/calico/ipam/v2/(assignment/ipv[46]/block/[^/]+|(host|virtual)/[^/]+/ipv[46]/block/[^/]+|handle/[^/]+|config)$`)

// TestIntegrationCalicoFormatEtcd: an etcd holding a Calico cluster's IPAM
// records (testdata/calico-etcd-ipam.json, written with raw puts in
// libcalico-go's model format: node-1's affine block partly allocated,
// node-2's block, their handles and the IPAM config) is allocated from by
// Tabby for node-1. Tabby fills node-1's existing block first, never hands
// out an address Calico had given, and what it writes is Calico's format
// at Calico's keys.
func TestIntegrationCalicoFormatEtcd(t *testing.T) {
	server := testservers.StartEtcd(t)
	ctx := context.Background()
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })

	fixture, err := os.ReadFile("testdata/calico-etcd-ipam.json")
	if err != nil {
		t.Fatal(err)
	}
	var recs []struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(fixture, &recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var val bytes.Buffer
		if err := json.Compact(&val, r.Value); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Put(ctx, r.Key, val.String()); err != nil {
			t.Fatal(err)
		}
	}

	c := etcdClient(t, server.Endpoint())
	mustCreate(t, c, pool("p", "10.1.0.0/16", 26))
	before := checkStore(t, c) // Calico's records read through Tabby's client
	calicoBlock := netip.MustParsePrefix("10.1.54.64/26")
	if len(before.byIP) != 30 || before.blocks[calicoBlock] == nil || len(before.handles) != 30 {
		t.Fatalf("read %d allocations, %d handles, blocks %v from Calico's records; want 30, 30 and %s", len(before.byIP), len(before.handles), keysOf(before.blocks), calicoBlock)
	}

	a := New(c, Config{})
	const n = 1000 // issue 12: 0 duplicates over 1,000 new allocations
	seen := map[netip.Addr]string{}
	dups := 0
	for i := range n {
		args := podArgs("node-1", fmt.Sprintf("tabby-%03d", i), 1, 0)
		ips := mustAssign(t, a, args)
		for _, ip := range ips {
			if h, ok := before.byIP[ip]; ok {
				dups++
				t.Errorf("DUPLICATE: %s handed to %s was Calico's allocation for %s", ip, args.HandleID, h)
			}
			if h, ok := seen[ip]; ok {
				dups++
				t.Errorf("DUPLICATE: %s handed to %s and %s", ip, h, args.HandleID)
			}
			seen[ip] = args.HandleID
			// node-1's existing block has 54 free addresses: they go first.
			if i < 54 && !calicoBlock.Contains(ip) {
				t.Errorf("allocation %d got %s outside node-1's existing affine block %s", i, ip, calicoBlock)
			}
		}
	}
	after := checkStore(t, c)
	if len(after.byIP) != 30+n {
		t.Errorf("%d allocations in the store, want %d", len(after.byIP), 30+n)
	}
	for ip, h := range before.byIP {
		if after.byIP[ip] != h {
			t.Errorf("Calico's allocation %s (%s) now held by %q", ip, h, after.byIP[ip])
		}
	}
	t.Logf("%d new allocations for node-1 around %d of Calico's: %d duplicates, %d blocks", n, len(before.byIP), dups, len(after.blocks))

	// Everything under /calico/ipam/v2/ is at Calico's keys, in Calico's
	// value format.
	resp, err := raw.Get(ctx, "/calico/ipam/v2/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if !calicoKeyRE.Match(kv.Key) {
			t.Errorf("key %s is not in Calico's layout", kv.Key)
		}
		if bytes.Contains(kv.Value, []byte(`"metadata"`)) || bytes.Contains(kv.Value, []byte(`"spec"`)) {
			t.Errorf("%s holds a v3 object, not Calico's model: %s", kv.Key, kv.Value)
		}
	}
	wantRaw := map[string]string{
		"/calico/ipam/v2/handle/k8s-pod-network.tabby-000":             `{"block":{"10.1.54.64/26":1},"deleted":false}`,
		"/calico/ipam/v2/host/node-1/ipv4/block/10.1.54.64-26":         `{"state":"confirmed","deleted":false}`,
		"/calico/ipam/v2/handle/k8s-pod-network.calico-a000":           `{"block":{"10.1.54.64/26":1},"deleted":false}`,
		"/calico/ipam/v2/assignment/ipv4/block/10.1.54.64-26 (prefix)": `{"cidr":"10.1.54.64/26","affinity":"host:node-1",`,
	}
	for key, want := range wantRaw {
		prefixOnly := false
		if k, ok := bytes.CutSuffix([]byte(key), []byte(" (prefix)")); ok {
			key, prefixOnly = string(k), true
		}
		r, err := raw.Get(ctx, key)
		if err != nil || len(r.Kvs) != 1 {
			t.Errorf("raw get %s: %v, %d keys", key, err, len(r.Kvs))
			continue
		}
		got := string(r.Kvs[0].Value)
		if (prefixOnly && !bytes.HasPrefix([]byte(got), []byte(want))) || (!prefixOnly && got != want) {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	// The blocks Tabby claimed for node-1 have Calico's affinity records.
	for cidr, b := range after.blocks {
		if b.Spec.Affinity == nil || *b.Spec.Affinity != "host:node-1" {
			continue
		}
		key := fmt.Sprintf("/calico/ipam/v2/host/node-1/ipv4/block/%s-%d", cidr.Addr(), cidr.Bits())
		if r, err := raw.Get(ctx, key); err != nil || len(r.Kvs) != 1 {
			t.Errorf("no Calico affinity record %s for node-1's block %s", key, cidr)
		}
	}
	if got := len(after.blocks); got < 2+(n-54+63)/64 {
		t.Errorf("%d blocks, want at least %d", got, 2+(n-54+63)/64)
	}
}

func keysOf[K comparable, V any](m map[K]V) []K {
	var out []K
	for k := range m {
		out = append(out, k)
	}
	return out
}
