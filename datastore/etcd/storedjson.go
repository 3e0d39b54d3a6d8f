package etcd

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// storedJSON are the semantics stored values are decoded with: those of
// encoding/json (v1), except that names match case-sensitively, as
// sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts does (Kubernetes'
// decoding; Calico's types hold no untyped numbers, the one other thing
// that function changes).
var storedJSON = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false))

// unmarshalStored decodes one stored value into obj. It runs on
// go-json-experiment's decoder (the proposed encoding/json/v2) in v1
// mode: a workload endpoint decodes in half the time with a third of the
// allocations of sigs.k8s.io/json's (BenchmarkUnmarshalStored), which is
// most of what felix spends reading a large cluster;
// TestUnmarshalStoredAsKubernetes and FuzzUnmarshalStoredAsKubernetes
// hold it to the same results.
func unmarshalStored(data []byte, obj any) error {
	return jsonv2.Unmarshal(data, obj, storedJSON)
}
