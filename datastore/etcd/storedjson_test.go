package etcd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// storedCorpus is every document of the API's valid and invalid corpora
// as JSON, with the kind it names (the invalid ones include values that
// do not decode).
func storedCorpus(t testing.TB) (kinds []string, values [][]byte) {
	files, _ := filepath.Glob("../../api/v3/testdata/*/*.yaml")
	if len(files) == 0 {
		t.Fatal("no API corpus")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil || string(js) == "null" {
				continue
			}
			var head struct{ Kind string }
			if json.Unmarshal(js, &head) != nil || head.Kind == "" {
				continue
			}
			kinds, values = append(kinds, head.Kind), append(values, js)
		}
	}
	return kinds, values
}

// decodeBothWays decodes value as kind with unmarshalStored and with
// sigs.k8s.io/json and fails t when they differ: in the object, or in
// whether the value is refused.
func decodeBothWays(t *testing.T, kind string, value []byte) {
	info, err := kindInfo(kind)
	if err != nil {
		return
	}
	got, want := info.New(), info.New()
	gotErr := unmarshalStored(value, got)
	wantErr := kjson.UnmarshalCaseSensitivePreserveInts(value, want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s %q: unmarshalStored error %v, sigs.k8s.io/json error %v", kind, value, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %q: unmarshalStored gave\n%#v\nsigs.k8s.io/json gave\n%#v", kind, value, got, want)
	}
}

// TestUnmarshalStoredAsKubernetes: every document of the API's corpora,
// and variations of each (names in other cases, duplicated and unknown
// members, wrong types, truncations), decode to the same object or are
// refused alike by unmarshalStored and sigs.k8s.io/json.
func TestUnmarshalStoredAsKubernetes(t *testing.T) {
	kinds, values := storedCorpus(t)
	n := 0
	for i, v := range values {
		s := string(v)
		variants := []string{s,
			strings.Replace(s, `"spec":`, `"Spec":`, 1),
			strings.Replace(s, `"metadata":`, `"metadata":{"name":"first"},"metadata":`, 1),
			strings.Replace(s, `"spec":{`, `"spec":{"unknownField":[1,{"a":null}],`, 1),
			strings.Replace(s, `"name":"`, `"name":7,"x":"`, 1),
			strings.Replace(s, `"spec":{`, `"spec":null,"x":{`, 1),
			strings.Replace(s, `"labels":{`, `"labels":{"a\u00e9\ud83d\ude00":"\xff",`, 1),
			s + " ",
			s + "{}",
			s[:len(s)/2],
		}
		for _, v := range variants {
			decodeBothWays(t, kinds[i], []byte(v))
			n++
		}
	}
	t.Logf("%d values of %d documents compared", n, len(values))
}

// FuzzUnmarshalStoredAsKubernetes: any value, decoded as any kind, gives
// the same object or the same refusal with unmarshalStored as with
// sigs.k8s.io/json.
func FuzzUnmarshalStoredAsKubernetes(f *testing.F) {
	kinds, values := storedCorpus(f)
	index := map[string]uint8{}
	all := v3.Kinds()
	for i, k := range all {
		index[k.Kind] = uint8(i)
	}
	for i, v := range values {
		f.Add(index[kinds[i]], v)
	}
	f.Fuzz(func(t *testing.T, kind uint8, value []byte) {
		decodeBothWays(t, all[int(kind)%len(all)].Kind, value)
	})
}

// BenchmarkUnmarshalStored decodes a stored workload endpoint with
// unmarshalStored and, for comparison, with sigs.k8s.io/json.
func BenchmarkUnmarshalStored(b *testing.B) {
	value := []byte(`{"kind":"WorkloadEndpoint","apiVersion":"projectcalico.org/v3","metadata":{"name":"node7-k8s-pod12345-eth0","namespace":"ns10","uid":"0a5f8e2c-4c1e-4f4b-9a43-2f1c7b0f6d11","creationTimestamp":"2026-12-02T07:00:00Z","labels":{"app":"a10","projectcalico.org/namespace":"ns10","projectcalico.org/orchestrator":"k8s","projectcalico.org/serviceaccount":"default"}},"spec":{"orchestrator":"k8s","node":"node7","pod":"pod12345","endpoint":"eth0","containerID":"5d1c0e8e0f6a","ipNetworks":["10.64.48.57/32"],"profiles":["kns.ns10","ksa.ns10.default"],"interfaceName":"cali0001234","ports":[{"name":"http","protocol":"TCP","port":8080,"hostPort":0,"hostIP":""}]}}`)
	b.Run("unmarshalStored", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w v3.WorkloadEndpoint
			if err := unmarshalStored(value, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sigs.k8s.io-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w v3.WorkloadEndpoint
			if err := kjson.UnmarshalCaseSensitivePreserveInts(value, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
}
