package etcd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

func ptr[T any](v T) *T { return &v }

// TestIPAMCodecFixtures decodes records written in Calico's format
// (testdata/calico-ipam, values as libcalico-go marshals its model) into
// the v3 objects Tabby's ipam uses, and encodes those back to the same
// JSON at the same key.
func TestIPAMCodecFixtures(t *testing.T) {
	attr := func(h, pod string) v3.AllocationAttribute {
		return v3.AllocationAttribute{HandleID: ptr(h), ActiveOwnerAttrs: map[string]string{
			"namespace": "default", "node": "node-1", "pod": pod, "timestamp": "2026-11-30 10:00:00.000000001 +0000 UTC"}}
	}
	allocs := func(used map[int]int) []*int {
		out := make([]*int, 64)
		for o, a := range used {
			out[o] = ptr(a)
		}
		return out
	}
	free := func(used ...int) []int {
		out := []int{}
		for o := 0; o < 64; o++ {
			if !slices.Contains(used, o) {
				out = append(out, o)
			}
		}
		return out
	}
	claim := metav1.Date(2026, 11, 30, 9, 59, 0, 0, time.UTC)
	tests := []struct {
		file, key string
		kind      string
		want      v3.Resource
	}{{
		file: "block-ipv4.json", key: "/calico/ipam/v2/assignment/ipv4/block/10.1.54.64-26", kind: v3.KindIPAMBlock,
		want: &v3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "10-1-54-64-26"}, Spec: v3.IPAMBlockSpec{
			CIDR: "10.1.54.64/26", Affinity: ptr("host:node-1"), AffinityClaimTime: &claim,
			Allocations: allocs(map[int]int{0: 0, 1: 1, 5: 2}), Unallocated: free(0, 1, 5),
			Attributes:     []v3.AllocationAttribute{attr("k8s-pod-network.aaaa", "web-0"), attr("k8s-pod-network.bbbb", "web-1"), attr("k8s-pod-network.cccc", "db-0")},
			SequenceNumber: 7, SequenceNumberForAllocation: map[string]uint64{"0": 4, "1": 5, "5": 6},
		}},
	}, {
		file: "block-ipv6.json", key: "/calico/ipam/v2/assignment/ipv6/block/fd00:10:244::-122", kind: v3.KindIPAMBlock,
		want: &v3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "fd00-10-244---122"}, Spec: v3.IPAMBlockSpec{
			CIDR: "fd00:10:244::/122", Affinity: ptr("host:node-1"),
			Allocations: allocs(map[int]int{0: 0, 2: 1}), Unallocated: free(0, 2),
			Attributes:     []v3.AllocationAttribute{attr("k8s-pod-network.aaaa", "web-0"), attr("k8s-pod-network.dddd", "web-2")},
			SequenceNumber: 3, SequenceNumberForAllocation: map[string]uint64{"0": 1, "2": 2},
		}},
	}, {
		file: "block-unaffine.json", key: "/calico/ipam/v2/assignment/ipv4/block/10.1.54.128-26", kind: v3.KindIPAMBlock,
		want: &v3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "10-1-54-128-26"}, Spec: v3.IPAMBlockSpec{
			CIDR: "10.1.54.128/26", Allocations: allocs(nil), Unallocated: free(), Attributes: []v3.AllocationAttribute{},
			SequenceNumberForAllocation: map[string]uint64{},
		}},
	}, {
		file: "affinity-confirmed.json", key: "/calico/ipam/v2/host/node-1/ipv4/block/10.1.54.64-26", kind: v3.KindBlockAffinity,
		want: &v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: "node-1-10-1-54-64-26"}, Spec: v3.BlockAffinitySpec{
			State: v3.BlockAffinityStateConfirmed, Node: "node-1", Type: "host", CIDR: "10.1.54.64/26"}},
	}, {
		file: "affinity-confirmed.json", key: "/calico/ipam/v2/host/node-1/ipv6/block/fd00:10:244::-122", kind: v3.KindBlockAffinity,
		want: &v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: "node-1-fd00-10-244---122"}, Spec: v3.BlockAffinitySpec{
			State: v3.BlockAffinityStateConfirmed, Node: "node-1", Type: "host", CIDR: "fd00:10:244::/122"}},
	}, {
		file: "affinity-pending.json", key: "/calico/ipam/v2/virtual/vm.a/ipv4/block/10.1.55.0-26", kind: v3.KindBlockAffinity,
		want: &v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: "vm.a-10-1-55-0-26"}, Spec: v3.BlockAffinitySpec{
			State: v3.BlockAffinityStatePending, Node: "vm.a", Type: "virtual", CIDR: "10.1.55.0/26"}},
	}, {
		file: "handle.json", key: "/calico/ipam/v2/handle/k8s-pod-network.aaaa", kind: v3.KindIPAMHandle,
		want: &v3.IPAMHandle{ObjectMeta: metav1.ObjectMeta{Name: "k8s-pod-network.aaaa"}, Spec: v3.IPAMHandleSpec{
			HandleID: "k8s-pod-network.aaaa", Block: map[string]int{"10.1.54.64/26": 1, "fd00:10:244::/122": 1}}},
	}, {
		file: "config.json", key: "/calico/ipam/v2/config", kind: v3.KindIPAMConfiguration,
		want: &v3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v3.IPAMConfigurationSpec{
			StrictAffinity: true, AutoAllocateBlocks: ptr(true), MaxBlocksPerHost: 4}},
	}, {
		// Calico's model omits false: no auto_allocate_blocks is false.
		file: "config-empty.json", key: "/calico/ipam/v2/config", kind: v3.KindIPAMConfiguration,
		want: &v3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v3.IPAMConfigurationSpec{AutoAllocateBlocks: ptr(false)}},
	}}
	for _, tc := range tests {
		t.Run(tc.file+"@"+tc.key, func(t *testing.T) {
			val, err := os.ReadFile(filepath.Join("testdata", "calico-ipam", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			info, _ := v3.LookupKind(tc.kind)
			readAt := time.Now()
			got, err := decode(info, kvpb.KeyValue{Key: []byte(tc.key), Value: val, CreateRevision: 10, ModRevision: 12})
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got.GetResourceVersion() != "12" || got.GetUID() != derivedUID(tc.key, 10) {
				t.Errorf("resourceVersion %q uid %q, want 12 and the derived uid", got.GetResourceVersion(), got.GetUID())
			}
			want := tc.want.DeepCopyObject().(v3.Resource)
			want.GetObjectKind().SetGroupVersionKind(info.New().GetObjectKind().GroupVersionKind())
			// Age unknown: it reads as created at the read.
			if ts := got.GetCreationTimestamp(); ts.Time.Before(readAt) || ts.Time.After(time.Now()) {
				t.Errorf("creationTimestamp %v is not the time of the read", ts)
			}
			want.SetCreationTimestamp(got.GetCreationTimestamp())
			want.SetUID(got.GetUID())
			want.SetResourceVersion("12")
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("decoded (-want +got):\n%s", d)
			}
			// The v3 name stands for the key, and the object writes to it.
			keys, err := keysFor(info, datastore.Key{Kind: tc.kind, Name: got.GetName()})
			if err != nil || !contains(strings.Join(keys, " "), tc.key) {
				t.Errorf("keys of name %q = %q, %v; want %s among them", got.GetName(), keys, err, tc.key)
			}
			if k, err := ipamformat.Key(got); err != nil || k != tc.key {
				t.Errorf("write key = %q, %v; want %s", k, err, tc.key)
			}
			enc, err := encode(got)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if string(enc)+"\n" != string(val) {
				t.Errorf("encoded\n%s\nwant (Calico's)\n%s", enc, val)
			}
		})
	}
}

// TestIPAMCodecRefuses: records Tabby cannot represent are bad records
// (never decoded with a field lost), and writes the format cannot hold
// are refused.
func TestIPAMCodecRefuses(t *testing.T) {
	blockInfo, _ := v3.LookupKind(v3.KindIPAMBlock)
	affInfo, _ := v3.LookupKind(v3.KindBlockAffinity)
	bad := []struct {
		name string
		info v3.KindInfo
		key  string
		val  string
	}{
		{"releasedAt (IP cooldown)", blockInfo, "/calico/ipam/v2/assignment/ipv4/block/10.0.0.0-30",
			`{"cidr":"10.0.0.0/30","affinity":null,"allocations":[0,null,null,null],"unallocated":[1,2,3],"attributes":[{"handle_id":"h","releasedAt":"2026-11-30T10:00:00Z"}],"sequenceNumber":1,"sequenceNumberForAllocation":{"0":0},"deleted":false}`},
		{"unknown field", blockInfo, "/calico/ipam/v2/assignment/ipv4/block/10.0.0.0-30",
			`{"cidr":"10.0.0.0/30","newField":1,"affinity":null,"allocations":[null,null,null,null],"unallocated":[0,1,2,3],"attributes":[],"sequenceNumber":0,"sequenceNumberForAllocation":{},"deleted":false}`},
		{"cidr not the key's", blockInfo, "/calico/ipam/v2/assignment/ipv4/block/10.0.0.4-30",
			`{"cidr":"10.0.0.0/30","affinity":null,"allocations":[null,null,null,null],"unallocated":[0,1,2,3],"attributes":[],"sequenceNumber":0,"sequenceNumberForAllocation":{},"deleted":false}`},
		{"Tabby's old block layout", blockInfo, "/calico/ipam/v2/assignment/block/10-0-0-0-30", `{}`},
		{"ipv6 block under ipv4", blockInfo, "/calico/ipam/v2/assignment/ipv4/block/fd00::-122", `{}`},
		{"non-canonical block key", blockInfo, "/calico/ipam/v2/assignment/ipv6/block/fd00:0::-122", `{}`},
		{"affinity key too deep", affInfo, "/calico/ipam/v2/host/n/ipv4/block/10.0.0.0-30/x", `{}`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(tc.info, kvpb.KeyValue{Key: []byte(tc.key), Value: []byte(tc.val), CreateRevision: 2, ModRevision: 2})
			var br datastore.BadRecord
			if !errors.As(err, &br) {
				t.Fatalf("decode = %v, want a BadRecord", err)
			}
			if br.StorageKey != tc.key {
				t.Errorf("BadRecord.StorageKey = %q, want %q", br.StorageKey, tc.key)
			}
		})
	}

	writes := []struct {
		name string
		obj  v3.Resource
		want string
	}{
		{"labels", &v3.IPAMHandle{ObjectMeta: metav1.ObjectMeta{Name: "h", Labels: map[string]string{"a": "b"}}, Spec: v3.IPAMHandleSpec{HandleID: "h"}}, "metadata.labels"},
		{"annotations", &v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: "n-10-0-0-0-30", Annotations: map[string]string{"a": "b"}}, Spec: v3.BlockAffinitySpec{Node: "n", CIDR: "10.0.0.0/30"}}, "metadata.annotations"},
	}
	for _, tc := range writes {
		t.Run("write "+tc.name, func(t *testing.T) {
			if _, err := encode(tc.obj); err == nil || !contains(err.Error(), tc.want) {
				t.Errorf("encode = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	names := []struct {
		name string
		obj  v3.Resource
	}{
		{"handle name is not its ID", &v3.IPAMHandle{ObjectMeta: metav1.ObjectMeta{Name: "handle-0123456789abcdef"}, Spec: v3.IPAMHandleSpec{HandleID: "Upper_Case"}}},
		{"block name is not its CIDR", &v3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "10-0-0-4-30"}, Spec: v3.IPAMBlockSpec{CIDR: "10.0.0.0/30"}}},
		{"affinity name is not node-block", &v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: "m-10-0-0-0-30"}, Spec: v3.BlockAffinitySpec{Node: "n", CIDR: "10.0.0.0/30"}}},
		{"affinity type", &v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: "n-10-0-0-0-30"}, Spec: v3.BlockAffinitySpec{Node: "n", CIDR: "10.0.0.0/30", Type: "other"}}},
	}
	for _, tc := range names {
		t.Run(tc.name, func(t *testing.T) {
			if k, err := ipamformat.Key(tc.obj); !errors.Is(err, ipamformat.ErrBadName) {
				t.Errorf("ipamformat.Key = %q, %v; want ipamformat.ErrBadName", k, err)
			}
		})
	}
}
