package v3

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tabbynet/tabby/api/numorstring"
)

func TestFelixConfigurationDefault(t *testing.T) {
	tests := []struct {
		name string
		in   FelixConfigurationSpec
		want FelixConfigurationSpec
	}{
		{
			name: "empty spec gets only the three fields Calico's client sets",
			in:   FelixConfigurationSpec{},
			want: FelixConfigurationSpec{
				FloatingIPs:                    new(FloatingIPsDisabled),
				BPFConnectTimeLoadBalancing:    new(BPFConnectTimeLBTCP),
				BPFHostNetworkedNATWithoutCTLB: new(BPFHostNetworkedNATEnabled),
			},
		},
		{
			name: "values the user set are kept",
			in: FelixConfigurationSpec{
				LogSeverityScreen:              "Debug",
				FloatingIPs:                    new(FloatingIPsEnabled),
				BPFConnectTimeLoadBalancing:    new(BPFConnectTimeLBDisabled),
				BPFHostNetworkedNATWithoutCTLB: new(BPFHostNetworkedNATDisabled),
			},
			want: FelixConfigurationSpec{
				LogSeverityScreen:              "Debug",
				FloatingIPs:                    new(FloatingIPsEnabled),
				BPFConnectTimeLoadBalancing:    new(BPFConnectTimeLBDisabled),
				BPFHostNetworkedNATWithoutCTLB: new(BPFHostNetworkedNATDisabled),
			},
		},
		{
			name: "deprecated CTLB switch on maps to Enabled without host NAT",
			in: FelixConfigurationSpec{
				BPFConnectTimeLoadBalancingEnabled: new(true),
				BPFConnectTimeLoadBalancing:        new(BPFConnectTimeLBTCP),
			},
			want: FelixConfigurationSpec{
				BPFConnectTimeLoadBalancingEnabled: new(true),
				FloatingIPs:                        new(FloatingIPsDisabled),
				BPFConnectTimeLoadBalancing:        new(BPFConnectTimeLBEnabled),
				BPFHostNetworkedNATWithoutCTLB:     new(BPFHostNetworkedNATDisabled),
			},
		},
		{
			name: "deprecated CTLB switch off maps to Disabled",
			in:   FelixConfigurationSpec{BPFConnectTimeLoadBalancingEnabled: new(false)},
			want: FelixConfigurationSpec{
				BPFConnectTimeLoadBalancingEnabled: new(false),
				FloatingIPs:                        new(FloatingIPsDisabled),
				BPFConnectTimeLoadBalancing:        new(BPFConnectTimeLBDisabled),
				BPFHostNetworkedNATWithoutCTLB:     new(BPFHostNetworkedNATDisabled),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: tt.in}
			fc.Default()
			if d := cmp.Diff(tt.want, fc.Spec); d != "" {
				t.Errorf("Default (-want +got):\n%s", d)
			}
			again := fc.DeepCopy()
			again.Default()
			if d := cmp.Diff(fc, again); d != "" {
				t.Errorf("Default is not idempotent (-once +twice):\n%s", d)
			}
		})
	}
}

func TestFelixDefaults(t *testing.T) {
	d := FelixDefaults()
	fc := &FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: d}
	if errs := fc.Validate(); len(errs) > 0 {
		t.Fatalf("FelixDefaults does not validate: %v", errs)
	}

	// Spot-check the values Tabby's Felix relies on against Calico's
	// felix/config/config_params.go.
	dur := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	got := FelixConfigurationSpec{
		LogSeverityScreen:           d.LogSeverityScreen,
		IptablesRefreshInterval:     d.IptablesRefreshInterval,
		RouteRefreshInterval:        d.RouteRefreshInterval,
		IpsetsRefreshInterval:       d.IpsetsRefreshInterval,
		InterfacePrefix:             d.InterfacePrefix,
		HealthPort:                  d.HealthPort,
		PrometheusMetricsPort:       d.PrometheusMetricsPort,
		DefaultEndpointToHostAction: d.DefaultEndpointToHostAction,
		IptablesMarkMask:            d.IptablesMarkMask,
		ChainInsertMode:             d.ChainInsertMode,
		VXLANPort:                   d.VXLANPort,
		VXLANVNI:                    d.VXLANVNI,
		IPIPMTU:                     d.IPIPMTU,
		BPFEnabled:                  d.BPFEnabled,
		IptablesBackend:             d.IptablesBackend,
		NATOutgoingExclusions:       d.NATOutgoingExclusions,
		KubeNodePortRanges:          d.KubeNodePortRanges,
	}
	want := FelixConfigurationSpec{
		LogSeverityScreen:           "Info",
		IptablesRefreshInterval:     dur(180 * time.Second),
		RouteRefreshInterval:        dur(90 * time.Second),
		IpsetsRefreshInterval:       dur(90 * time.Second),
		InterfacePrefix:             "cali",
		HealthPort:                  new(9099),
		PrometheusMetricsPort:       new(9091),
		DefaultEndpointToHostAction: "Drop",
		IptablesMarkMask:            new(uint32(0xffff0000)),
		ChainInsertMode:             "Insert",
		VXLANPort:                   new(4789),
		VXLANVNI:                    new(4096),
		IPIPMTU:                     new(0),
		BPFEnabled:                  new(false),
		IptablesBackend:             new(IptablesBackendAuto),
		NATOutgoingExclusions:       new(NATOutgoingExclusionsIPPoolsOnly),
		KubeNodePortRanges:          &[]numorstring.Port{{MinPort: 30000, MaxPort: 32767}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FelixDefaults (-want +got):\n%s", diff)
	}

	wantIn := []string{"tcp:22", "udp:68", "tcp:179", "tcp:2379", "tcp:2380", "tcp:5473", "tcp:6443", "tcp:6666", "tcp:6667"}
	wantOut := []string{"udp:53", "udp:67", "tcp:179", "tcp:2379", "tcp:2380", "tcp:5473", "tcp:6443", "tcp:6666", "tcp:6667"}
	if diff := cmp.Diff(wantIn, cfgProtoPortStrings(*d.FailsafeInboundHostPorts)); diff != "" {
		t.Errorf("failsafeInboundHostPorts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantOut, cfgProtoPortStrings(*d.FailsafeOutboundHostPorts)); diff != "" {
		t.Errorf("failsafeOutboundHostPorts (-want +got):\n%s", diff)
	}

	// Each call is independent.
	(*d.FailsafeInboundHostPorts)[0].Port = 2222
	*d.HealthPort = 1
	again := FelixDefaults()
	if (*again.FailsafeInboundHostPorts)[0].Port != 22 || *again.HealthPort != 9099 {
		t.Error("FelixDefaults returned shared data: a caller's change leaked into the next call")
	}
}

func cfgProtoPortStrings(pps []ProtoPort) []string {
	out := make([]string, len(pps))
	for i, pp := range pps {
		out[i] = pp.Protocol + ":" + strconv.Itoa(int(pp.Port))
	}
	return out
}

func TestFelixConfigurationValidate(t *testing.T) {
	dur := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	tests := []struct {
		name     string
		cfgName  string
		spec     FelixConfigurationSpec
		wantErrs []string
	}{
		{name: "empty default", spec: FelixConfigurationSpec{}},
		{name: "per-node name", cfgName: "node.worker-1.example.com", spec: FelixConfigurationSpec{LogSeverityScreen: "Debug"}},
		{name: "other names are accepted, as in Calico", cfgName: "staging-overrides"},
		{
			name: "case-insensitive enums accept any case, as Calico's CRD patterns do",
			spec: FelixConfigurationSpec{
				ChainInsertMode: "append", DefaultEndpointToHostAction: "ACCEPT", LogSeverityScreen: "debug",
				IptablesBackend: new(IptablesBackend("nft")), BPFLogLevel: "info", RouteSource: "workloadips",
				IptablesFilterDenyAction: "REJECT", BPFExternalServiceMode: "dsr",
			},
		},
		{
			name: "exact-case enums do not",
			spec: FelixConfigurationSpec{IPForwarding: "enabled", BPFRedirectToPeer: "l2only", AWSSrcDstCheck: new(AWSSrcDstCheckOption("disable"))},
			wantErrs: []string{
				`spec.ipForwarding: "enabled" is not one of Enabled, Disabled`,
				`spec.bpfRedirectToPeer: "l2only" is not one of Enabled, Disabled, L2Only`,
				`spec.awsSrcDstCheck: "disable" is not one of DoNothing, Enable, Disable`,
			},
		},
		{
			name: "failsafe protocol: empty, upper and lower case are fine",
			spec: FelixConfigurationSpec{FailsafeInboundHostPorts: &[]ProtoPort{
				{Port: 22}, {Protocol: "TCP", Port: 6443}, {Protocol: "udp", Port: 68, Net: "10.0.0.0/8"}, {Protocol: "Sctp", Port: 9000, Net: "fd00::1"},
			}},
		},
		{
			name: "failsafe protocol and net errors carry the element path",
			spec: FelixConfigurationSpec{FailsafeOutboundHostPorts: &[]ProtoPort{
				{Protocol: "tcp", Port: 1}, {Protocol: "icmp", Port: 0, Net: "nonsense"},
			}},
			wantErrs: []string{
				`spec.failsafeOutboundHostPorts[1].protocol: "icmp" is not one of TCP, UDP, SCTP (any case)`,
				`spec.failsafeOutboundHostPorts[1].net: "nonsense" is not a valid IP address or CIDR`,
			},
		},
		{
			name: "mark masks need 8 bits",
			spec: FelixConfigurationSpec{IptablesMarkMask: new(uint32(0xff)), NftablesMarkMask: new(uint32(0))},
			wantErrs: []string{
				`spec.nftablesMarkMask: 0x00000000 has 0 bits set; a mark mask needs at least 8`,
			},
		},
		{
			name: "route table ranges: order, start, kernel limit and table count",
			spec: FelixConfigurationSpec{RouteTableRanges: &RouteTableRanges{
				{Min: 200, Max: 100}, {Min: 1, Max: 5000000000}, {Min: 0, Max: 1},
			}},
			wantErrs: []string{
				`spec.routeTableRanges[0]: min 200 is greater than max 100`,
				`spec.routeTableRanges[1].max: 5000000000 is above the largest route table index 4294967295`,
				`spec.routeTableRanges[2].min: 0 is invalid: route table indices start at 1`,
				`spec.routeTableRanges: cover 4999999903 tables; at most 65535 are allowed`,
			},
		},
		{
			name:     "route table ranges: too many tables in valid ranges",
			spec:     FelixConfigurationSpec{RouteTableRanges: &RouteTableRanges{{Min: 1000, Max: 40000}, {Min: 50000, Max: 80000}}},
			wantErrs: []string{`spec.routeTableRanges: cover 69002 tables; at most 65535 are allowed`},
		},
		{
			name: "interfaceExclude mixes names and /regexps/",
			spec: FelixConfigurationSpec{InterfaceExclude: "kube-ipvs0,/^veth[0-9]+$/,bad name"},
			wantErrs: []string{
				`spec.interfaceExclude: entry "bad name" is neither an interface name (at most 15 of letters, digits, '.', '_', '-') nor a /regexp/`,
			},
		},
		{
			name: "addresses must be of the right family",
			spec: FelixConfigurationSpec{
				DeviceRouteSourceAddress: "fd00::1", DeviceRouteSourceAddressIPv6: "10.0.0.1",
				NATOutgoingAddress: "not-an-ip", ExternalNodesCIDRList: &[]string{"10.1.0.0/16", "junk"},
			},
			wantErrs: []string{
				`spec.natOutgoingAddress: "not-an-ip" is not a valid IP address`,
				`spec.deviceRouteSourceAddress: "fd00::1" is not an IPv4 address`,
				`spec.deviceRouteSourceAddressIPv6: "10.0.0.1" is not an IPv6 address`,
				`spec.externalNodesList[1]: "junk" is not a valid IP address or CIDR`,
			},
		},
		{
			name: "port ranges must be numeric and ordered",
			spec: FelixConfigurationSpec{
				KubeNodePortRanges: &[]numorstring.Port{{MinPort: 200, MaxPort: 100}},
				BPFPSNATPorts:      &numorstring.Port{PortName: "psnat"},
			},
			wantErrs: []string{
				`spec.kubeNodePortRanges[0]: "200:100" has its minimum above its maximum`,
				`spec.bpfPSNATPorts: "psnat" is a named port; a port number or min:max range is required`,
			},
		},
		{
			name: "numeric bounds",
			spec: FelixConfigurationSpec{
				BPFExtToServiceConnmark: new(4294967296), WireguardRoutingRulePriority: new(32766),
				IPv4NormalRoutePriority: new(0), BPFMaglevMaxServices: new(3001), DeviceRouteProtocol: new(256),
				BPFMapSizeConntrackCleanupQueue: new(0), BPFMapSizeRoute: new(-1),
			},
			wantErrs: []string{
				`spec.deviceRouteProtocol: 256 is outside 0-255`,
				`spec.ipv4NormalRoutePriority: 0 is outside 1-2147483646`,
				`spec.bpfExtToServiceConnmark: 4294967296 is outside 0-4294967295`,
				`spec.bpfMapSizeRoute: -1 is below the minimum 0`,
				`spec.bpfMapSizeConntrackCleanupQueue: 0 is below the minimum 1`,
				`spec.bpfMaglevMaxServices: 3001 is outside 1-3000`,
				`spec.wireguardRoutingRulePriority: 32766 is outside 1-32765`,
			},
		},
		{
			name: "hosts, interface names and override timeouts",
			spec: FelixConfigurationSpec{
				MetadataAddr: "none", PrometheusMetricsHost: "::", HealthHost: new("health host"),
				WireguardInterfaceName: "*", BPFForceTrackPacketsFromIfaces: &[]string{"docker+", "a-very-long-interface+"},
				HealthTimeoutOverrides:           []HealthTimeoutOverride{{Name: "Calc Graph", Timeout: metav1.Duration{Duration: -time.Second}}},
				DebugSimulateDataplaneApplyDelay: dur(-time.Millisecond),
			},
			wantErrs: []string{
				`spec.debugSimulateDataplaneApplyDelay: must not be negative (got -1ms)`,
				`spec.healthHost: "health host" is not a host name or IP address`,
				`spec.healthTimeoutOverrides[0].timeout: must not be negative (got -1s)`,
				`spec.bpfForceTrackPacketsFromIfaces[1]: "a-very-long-interface+" is not an iptables interface match such as "docker+" (at most 15 characters)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.cfgName
			if name == "" {
				name = "default"
			}
			fc := &FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tt.spec}
			if d := cmp.Diff(tt.wantErrs, cfgErrStrings(fc.Validate())); d != "" {
				t.Errorf("Validate errors (-want +got):\n%s", d)
			}
		})
	}
}

func cfgErrStrings(errs ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestFelixConfigurationNodeName(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{"node.worker-1", "worker-1", true},
		{"node.ip-10-0-0-1.ec2.internal", "ip-10-0-0-1.ec2.internal", true},
		{"node.", "", false},
		{"default", "", false},
		{"nodes.worker-1", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := FelixConfigurationNodeName(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("FelixConfigurationNodeName(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestFelixCorpusCoversEveryField checks that the valid corpus sets every
// field of FelixConfigurationSpec (nested fields included) at least once, so
// that each one is decoded, validated and round-tripped by the corpus test.
func TestFelixCorpusCoversEveryField(t *testing.T) {
	cfgCheckCorpusCoverage(t, KindFelixConfiguration, reflect.TypeFor[FelixConfiguration](), nil)
}

// cfgCheckCorpusCoverage fails for each JSON field path of kind's type that
// no document of testdata/valid/config-*.yaml sets. Paths in stop are leaves.
func cfgCheckCorpusCoverage(t *testing.T, kind string, typ reflect.Type, stop map[string]bool) {
	t.Helper()
	want := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			continue // TypeMeta and ObjectMeta
		}
		cfgTypePaths(f.Type, cfgJSONName(f), stop, want)
	}

	files, _ := filepath.Glob("testdata/valid/config-*.yaml")
	have := map[string]bool{}
	docs := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range splitDocs(string(data)) {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var m map[string]any
			if err := json.Unmarshal(js, &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m["kind"] != kind {
				continue
			}
			docs++
			for k, v := range m {
				if k != "metadata" && k != "kind" && k != "apiVersion" {
					cfgDocPaths(v, k, have)
				}
			}
		}
	}
	if docs == 0 {
		t.Fatalf("no %s documents in testdata/valid/config-*.yaml", kind)
	}
	var missing []string
	for p := range want {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("no valid %s document sets %s", kind, p)
	}
}

var cfgJSONMarshaler = reflect.TypeFor[json.Marshaler]()

// cfgTypePaths records the JSON paths of t below prefix.
func cfgTypePaths(t reflect.Type, prefix string, stop map[string]bool, out map[string]bool) {
	out[prefix] = true
	if stop[prefix] {
		return
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.Implements(cfgJSONMarshaler) || reflect.PointerTo(t).Implements(cfgJSONMarshaler) {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name := cfgJSONName(f); name != "" {
			cfgTypePaths(f.Type, prefix+"."+name, stop, out)
		}
	}
}

func cfgJSONName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// cfgDocPaths records the paths of a decoded JSON value below prefix; list
// elements share their list's path.
func cfgDocPaths(v any, prefix string, out map[string]bool) {
	out[prefix] = true
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			cfgDocPaths(e, prefix+"."+k, out)
		}
	case []any:
		for _, e := range v {
			cfgDocPaths(e, prefix, out)
		}
	}
}
