package netconf

import "testing"

// TestPolicySetupTimeout: Calico's policy_setup_timeout_seconds and
// endpoint_status_dir are read, the directory defaults to felix's, and a
// negative timeout is refused.
func TestPolicySetupTimeout(t *testing.T) {
	base := `{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"calico","etcd_endpoints":"http://127.0.0.1:2379","ipam":{"type":"calico-ipam"}`
	c, err := Parse([]byte(base + `,"policy_setup_timeout_seconds":10}`))
	if err != nil || c.PolicySetupTimeoutSeconds != 10 || c.EndpointStatusDir != DefaultEndpointStatusDir {
		t.Fatalf("got %+v, %v", c, err)
	}
	c, err = Parse([]byte(base + `,"endpoint_status_dir":"/x/endpoint-status"}`))
	if err != nil || c.PolicySetupTimeoutSeconds != 0 || c.EndpointStatusDir != "/x/endpoint-status" {
		t.Fatalf("got %+v, %v", c, err)
	}
	if _, err := Parse([]byte(base + `,"policy_setup_timeout_seconds":-1}`)); err == nil {
		t.Error("a negative policy_setup_timeout_seconds was accepted")
	}
}
