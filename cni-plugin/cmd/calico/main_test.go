package main

import "testing"

func TestWantsKubernetes(t *testing.T) {
	tests := []struct {
		conf string
		want bool
	}{
		{`{"datastore_type":"kubernetes"}`, true},
		{`{"datastore_type":"etcdv3","kubernetes":{"kubeconfig":"/k"}}`, false},
		{`{"kubernetes":{"kubeconfig":"/k"}}`, true},
		{`{"etcd_endpoints":"http://a:1","kubernetes":{"kubeconfig":"/k"}}`, false},
		{`{"kubernetes":{"k8s_api_root":"https://x"}}`, true},
		{`{}`, false},
		{`not json`, false},
	}
	for _, tc := range tests {
		if got := wantsKubernetes([]byte(tc.conf)); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.conf, got, tc.want)
		}
	}
}
