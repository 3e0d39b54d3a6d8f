package commands

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// calicoIPAMSection is an export's IPAM section as Calico's calicoctl
// writes it (KVPair Key/Value/TTL; model JSON), with an older block
// naming its host in hostAffinity.
const calicoIPAMSection = `{
  "block_affinities": [
    {"Key": "/calico/ipam/v2/host/node-a/ipv4/block/10.9.0.0-30", "Value": {"state": "confirmed", "deleted": false}, "TTL": 0}
  ],
  "blocks": [
    {"Key": "/calico/ipam/v2/assignment/ipv4/block/10.9.0.0-30", "Value": {
      "cidr": "10.9.0.0/30", "affinity": null, "hostAffinity": "node-a",
      "allocations": [0, null, null, null], "unallocated": [1, 2, 3],
      "attributes": [{"handle_id": "k8s-pod-network.abc", "secondary": {"namespace": "default", "node": "node-a", "pod": "web"}}],
      "deleted": false, "sequenceNumber": 7, "sequenceNumberForAllocation": {"0": 6}}, "TTL": 0}
  ],
  "handles": [
    {"Key": "/calico/ipam/v2/handle/k8s-pod-network.abc", "Value": {"block": {"10.9.0.0/30": 1}, "deleted": false}, "TTL": 0}
  ],
  "config": {"Key": "/calico/ipam/v2/config", "Value": {"strict_affinity": true, "auto_allocate_blocks": true, "maxBlocksPerHost": 3}, "TTL": 0}
}`

func decodeSection(t *testing.T, s string) (*migrateIPAM, error) {
	t.Helper()
	var m migrateIPAM
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	return &m, dec.Decode(&m)
}

// TestMigrateIPAMImport: Calico's IPAM section becomes Tabby's IPAM
// resources (names as Tabby's IPAM gives them, the old hostAffinity read
// as the affinity); a field Tabby cannot keep (an allocation's releasedAt,
// for IP cooldown) is refused, not dropped.
func TestMigrateIPAMImport(t *testing.T) {
	m, err := decodeSection(t, calicoIPAMSection)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := m.ipamResources()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]v3.Resource{}
	for _, r := range rs {
		got[v3.KindOf(r)+"/"+r.GetName()] = r
	}
	b, ok := got["IPAMBlock/10-9-0-0-30"].(*v3.IPAMBlock)
	if !ok || b.Spec.Affinity == nil || *b.Spec.Affinity != "host:node-a" || b.Spec.SequenceNumber != 7 || *b.Spec.Attributes[0].HandleID != "k8s-pod-network.abc" {
		t.Errorf("block: %+v (all: %v)", b, got)
	}
	if a, ok := got["BlockAffinity/node-a-10-9-0-0-30"].(*v3.BlockAffinity); !ok || a.Spec.Node != "node-a" || a.Spec.CIDR != "10.9.0.0/30" || a.Spec.State != "confirmed" || a.Spec.Type != "host" {
		t.Errorf("affinity: %+v (all: %v)", a, got)
	}
	if h, ok := got["IPAMHandle/k8s-pod-network.abc"].(*v3.IPAMHandle); !ok || h.Spec.HandleID != "k8s-pod-network.abc" || h.Spec.Block["10.9.0.0/30"] != 1 {
		t.Errorf("handle: %+v (all: %v)", h, got)
	}
	if c, ok := got["IPAMConfiguration/default"].(*v3.IPAMConfiguration); !ok || !c.Spec.StrictAffinity || c.Spec.MaxBlocksPerHost != 3 {
		t.Errorf("config: %+v", c)
	}
	for _, r := range rs {
		r.Default()
		if errs := r.Validate(); len(errs) > 0 {
			t.Errorf("%s %s invalid: %v", v3.KindOf(r), r.GetName(), errs)
		}
	}

	cooling := strings.Replace(calicoIPAMSection, `"pod": "web"}}`, `"pod": "web"}, "releasedAt": "2026-01-01T00:00:00Z"}`, 1)
	mc, err := decodeSection(t, cooling)
	if err == nil {
		_, err = mc.ipamResources()
	}
	if err == nil || !strings.Contains(err.Error(), "releasedAt") {
		t.Errorf("releasedAt: error %v, want a refusal naming it", err)
	}
	m.BlockAffinities[0].Key = "/calico/ipam/v2/host/node-a/block"
	if _, err := m.ipamResources(); err == nil {
		t.Error("a malformed affinity key was accepted")
	}
}
