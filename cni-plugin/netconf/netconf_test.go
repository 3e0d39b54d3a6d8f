package netconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// calicoConflistPlugin is the calico plugin's entry of the conflist Calico's
// own manifests install, unchanged.
const calicoConflistPlugin = `{
  "type": "calico",
  "name": "k8s-pod-network",
  "cniVersion": "1.0.0",
  "log_level": "info",
  "log_file_path": "/var/log/calico/cni/cni.log",
  "datastore_type": "kubernetes",
  "nodename": "node1",
  "mtu": 1440,
  "ipam": { "type": "calico-ipam" },
  "policy": { "type": "k8s" },
  "kubernetes": { "kubeconfig": "/etc/cni/net.d/calico-kubeconfig" },
  "container_settings": { "allow_ip_forwarding": true }
}`

func TestParseCalicoConfig(t *testing.T) {
	c, err := Parse([]byte(calicoConflistPlugin))
	if err != nil {
		t.Fatal(err)
	}
	if c.DatastoreType != DatastoreKubernetes || c.MTU != 1440 || c.IPAM.Type != "calico-ipam" ||
		c.Kubernetes.Kubeconfig != "/etc/cni/net.d/calico-kubeconfig" || !c.ContainerSettings.AllowIPForwarding ||
		c.Policy.PolicyType != "k8s" || c.Nodename != "node1" {
		t.Fatalf("parsed %+v", c)
	}
	etcd, err := Parse([]byte(`{"name":"n","type":"calico","etcd_endpoints":"http://127.0.0.1:2379, http://10.0.0.2:2379","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if etcd.DatastoreType != DatastoreEtcdV3 || etcd.MTU != 0 || strings.Join(etcd.Endpoints(), ",") != "http://127.0.0.1:2379,http://10.0.0.2:2379" {
		t.Fatalf("defaults: %+v", etcd)
	}
}

func TestParseBadConfig(t *testing.T) {
	base := `"name":"n","type":"calico","ipam":{"type":"calico-ipam"}`
	tests := []struct {
		name, in string
		code     uint
		want     string
	}{
		{"malformed JSON", `{"name":`, types.ErrDecodingFailure, "not valid JSON"},
		{"not an object", `[1,2]`, types.ErrDecodingFailure, "not valid JSON"},
		{"missing name", `{"type":"calico","etcd_endpoints":"http://a:1","ipam":{"type":"calico-ipam"}}`, types.ErrInvalidNetworkConfig, "name: is required"},
		{"unknown datastore", `{` + base + `,"datastore_type":"consul"}`, types.ErrInvalidNetworkConfig, `datastore_type: "consul" is not supported`},
		{"etcd without endpoints", `{` + base + `,"datastore_type":"etcdv3"}`, types.ErrInvalidNetworkConfig, "etcd_endpoints: is required"},
		{"etcd endpoint not a URL", `{` + base + `,"etcd_endpoints":"127.0.0.1:2379"}`, types.ErrInvalidNetworkConfig, `etcd_endpoints: "127.0.0.1:2379" is not an http://, https://, unix:// or unixs:// URL`},
		{"kubernetes without kubeconfig", `{` + base + `,"datastore_type":"kubernetes"}`, types.ErrInvalidNetworkConfig, "kubernetes.kubeconfig: is required"},
		{"MTU too small", `{` + base + `,"etcd_endpoints":"http://a:1","mtu":100}`, types.ErrInvalidNetworkConfig, "mtu: 100 is outside 576-65535"},
		{"MTU not a number", `{` + base + `,"etcd_endpoints":"http://a:1","mtu":"big"}`, types.ErrDecodingFailure, "not valid JSON"},
		{"no ipam", `{"name":"n","type":"calico","etcd_endpoints":"http://a:1"}`, types.ErrInvalidNetworkConfig, "ipam.type: is required"},
		{"bad policy type", `{` + base + `,"etcd_endpoints":"http://a:1","policy":{"type":"opa"}}`, types.ErrInvalidNetworkConfig, `policy.type: "opa" is not supported`},
		{"bad log level", `{` + base + `,"etcd_endpoints":"http://a:1","log_level":"chatty"}`, types.ErrInvalidNetworkConfig, `log_level: "chatty"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a netconf.Error", err)
			}
			if ce.Code != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got code %d %q, want code %d containing %q", ce.Code, err, tc.code, tc.want)
			}
		})
	}
}

func TestResolveNodename(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nodename")
	os.WriteFile(file, []byte("node-from-file\n"), 0o644)
	host := func() (string, error) { return "Host-A", nil }
	tests := []struct {
		name string
		c    NetConf
		want string
		err  string
	}{
		{"config wins", NetConf{Nodename: "n1", NodenameFile: file}, "n1", ""},
		{"file", NetConf{NodenameFile: file}, "node-from-file", ""},
		{"optional missing file: hostname", NetConf{NodenameFile: filepath.Join(dir, "none"), NodenameFileOptional: true}, "host-a", ""},
		{"required missing file", NetConf{NodenameFile: filepath.Join(dir, "none")}, "", "is calico-node running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.ResolveNodename(host)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=prod;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;OTHER=x")
	if err != nil {
		t.Fatal(err)
	}
	if !a.IsKubernetes() || a.K8S_POD_NAME != "web-0" || a.K8S_POD_NAMESPACE != "prod" {
		t.Fatalf("%+v", a)
	}
	if _, err := ParseArgs("garbage"); err == nil {
		t.Fatal("accepted garbage CNI_ARGS")
	}
	ips, err := ParseIPList("ipAddrs", `["10.0.0.5","fd00::5"]`)
	if err != nil || len(ips) != 2 {
		t.Fatal(ips, err)
	}
	if _, err := ParseIPList("ipAddrs", `["10.0.0.500"]`); err == nil {
		t.Fatal("accepted a bad IP")
	}
}

// TestPrevResultNeverFailsParse: whatever prevResult holds, the
// configuration parses (a DEL must always complete); CHECK decodes it
// with DecodePrevResult (issue 19, item 8).
func TestPrevResultNeverFailsParse(t *testing.T) {
	base := `{"name":"n","type":"calico","etcd_endpoints":"http://127.0.0.1:2379","ipam":{"type":"calico-ipam"},"prevResult":`
	for _, prev := range []string{`"garbage"`, `[1,2]`, `7`, `{"ips":"x"}`, `null`} {
		c, err := Parse([]byte(base + prev + `}`))
		if err != nil {
			t.Fatalf("prevResult %s: %v", prev, err)
		}
		err = c.DecodePrevResult()
		if bad := prev != `null` && prev != `{"ips":"x"}`; bad != (err != nil) {
			t.Errorf("prevResult %s: DecodePrevResult error %v", prev, err)
		}
	}
}

func TestValidatePod(t *testing.T) {
	for _, tc := range []struct {
		ns, pod string
		ok      bool
	}{
		{"default", "web-0", true},
		{"kube-system", "coredns-5d78c9869d-abcde", true},
		{"default", "a.b.c", true},
		{"default", "a/b", false},
		{"default", strings.Repeat("p", 254), false},
		{"Default", "web", false},
		{"default", "Web", false},
		{"de.fault", "web", false},
		{"default", "-web", false},
		{"default", "web-", false},
	} {
		a, err := ParseArgs("K8S_POD_NAMESPACE=" + tc.ns + ";K8S_POD_NAME=" + tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.ValidatePod(); (err == nil) != tc.ok {
			t.Errorf("%s/%s: %v, want ok=%v", tc.ns, tc.pod, err, tc.ok)
		}
	}
}

// FuzzParse: any bytes as the configuration and CNI_ARGS parse or fail
// with an error, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"name":"n","type":"calico","etcd_endpoints":"http://127.0.0.1:2379","ipam":{"type":"calico-ipam"},"prevResult":{"ips":[]}}`), "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web")
	f.Add([]byte(`{"name":"n","type":"calico","datastore_type":"kubernetes","kubernetes":{"kubeconfig":"/k"},"mtu":-1}`), "IgnoreUnknown=1;K8S_POD_NAME=a/b")
	f.Fuzz(func(t *testing.T, conf []byte, args string) {
		if c, err := Parse(conf); err == nil {
			_ = c.DecodePrevResult()
			_, _ = c.ResolveNodename(func() (string, error) { return "node", nil })
		}
		if a, err := ParseArgs(args); err == nil {
			_ = a.ValidatePod()
		}
	})
}

// TestResolveMTU: as Calico's plugin, an unset mtu comes from calico-node's
// MTU file, else 1500; require_mtu_file makes a missing file an error; a
// file with no usable MTU is an error, not the default.
func TestResolveMTU(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "1450\n")
	bad := write("bad", "jumbo")
	tiny := write("tiny", "100")
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name    string
		conf    NetConf
		path    string
		want    int
		wantErr bool
	}{
		{"config wins over the file", NetConf{MTU: 9000}, good, 9000, false},
		{"unset: the file", NetConf{}, good, 1450, false},
		{"unset, no file: 1500", NetConf{}, missing, DefaultMTU, false},
		{"unset, no file, required", NetConf{RequireMTUFile: true}, missing, 0, true},
		{"required and there", NetConf{RequireMTUFile: true}, good, 1450, false},
		{"file not a number", NetConf{}, bad, 0, true},
		{"file out of range", NetConf{}, tiny, 0, true},
		{"file is a directory", NetConf{}, dir, 0, true},
	}
	for _, tt := range tests {
		got, err := tt.conf.ResolveMTU(tt.path)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: got %d, %v; want %d (error %v)", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestDatastoreOf: the datastore choice read from a config that may be
// invalid (Parse's rule: datastore_type, else a kubeconfig or API root
// without etcd_endpoints).
func TestDatastoreOf(t *testing.T) {
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
		if got, _ := DatastoreOf([]byte(tc.conf)); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.conf, got, tc.want)
		}
	}
}
