package etcd

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/tabbynet/tabby/datastore/etcd/kvpb"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestDecodeAllInParallelAsInOrder: a list large enough to be decoded by
// several goroutines gives the same objects, in the same order, with the
// same undecodable records, as decoding one by one.
func TestDecodeAllInParallelAsInOrder(t *testing.T) {
	info, err := kindInfo(v3.KindWorkloadEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	var kvs []kvpb.KeyValue
	for i := range 5*parallelDecodeMin + 17 {
		v := fmt.Sprintf(`{"kind":"WorkloadEndpoint","apiVersion":"projectcalico.org/v3","metadata":{"name":"n-k8s-p%d-eth0","namespace":"ns%d","labels":{"app":"a%d"}},"spec":{"node":"n","ipNetworks":["10.0.%d.%d/32"]}}`, i, i%7, i%13, i/256, i%256)
		if i%997 == 0 {
			v = v[:20] // undecodable
		}
		kvs = append(kvs, kvpb.KeyValue{Key: []byte(fmt.Sprintf("/calico/resources/v3/projectcalico.org/workloadendpoints/ns%d/p%d", i%7, i)), Value: []byte(v), ModRevision: kvpb.Rev(i + 1)})
	}
	objs, errs := decodeAll(info, kvs)
	bad := 0
	for i, kv := range kvs {
		want, wantErr := decode(info, kv)
		if !reflect.DeepEqual(objs[i], want) || (errs[i] == nil) != (wantErr == nil) {
			t.Fatalf("record %d: parallel %v %v, one by one %v %v", i, objs[i], errs[i], want, wantErr)
		}
		var br datastore.BadRecord
		if errors.As(errs[i], &br) {
			bad++
		}
	}
	if bad != 6 {
		t.Fatalf("%d undecodable records, want 6", bad)
	}
}
