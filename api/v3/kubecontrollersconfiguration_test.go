package v3

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKubeControllersConfigurationDefault(t *testing.T) {
	dur := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	tests := []struct {
		name string
		in   KubeControllersConfigurationSpec
		want KubeControllersConfigurationSpec
	}{
		{
			name: "no controllers: only the metrics port",
			in:   KubeControllersConfigurationSpec{},
			want: KubeControllersConfigurationSpec{HealthChecks: "Enabled", PrometheusMetricsPort: new(9094)},
		},
		{
			name: "node and loadBalancer controllers get their client defaults; others stay as written",
			in: KubeControllersConfigurationSpec{Controllers: ControllersConfig{
				Node:         &NodeControllerConfig{SyncLabels: "Enabled"},
				LoadBalancer: &LoadBalancerControllerConfig{},
				Policy:       &PolicyControllerConfig{},
			}},
			want: KubeControllersConfigurationSpec{HealthChecks: "Enabled",
				PrometheusMetricsPort: new(9094),
				Controllers: ControllersConfig{
					Node:         &NodeControllerConfig{SyncLabels: "Enabled", LeakGracePeriod: dur(15 * time.Minute)},
					LoadBalancer: &LoadBalancerControllerConfig{AssignIPs: AllServices},
					Policy:       &PolicyControllerConfig{},
				},
			},
		},
		{
			name: "values the user set are kept, zero included",
			in: KubeControllersConfigurationSpec{
				PrometheusMetricsPort: new(0),
				Controllers: ControllersConfig{
					Node:         &NodeControllerConfig{LeakGracePeriod: dur(0)},
					LoadBalancer: &LoadBalancerControllerConfig{AssignIPs: RequestedServicesOnly},
				},
			},
			want: KubeControllersConfigurationSpec{HealthChecks: "Enabled",
				PrometheusMetricsPort: new(0),
				Controllers: ControllersConfig{
					Node:         &NodeControllerConfig{LeakGracePeriod: dur(0)},
					LoadBalancer: &LoadBalancerControllerConfig{AssignIPs: RequestedServicesOnly},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kcc := &KubeControllersConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: tt.in}
			kcc.Default()
			if d := cmp.Diff(tt.want, kcc.Spec); d != "" {
				t.Errorf("Default (-want +got):\n%s", d)
			}
			again := kcc.DeepCopy()
			again.Default()
			if d := cmp.Diff(kcc, again); d != "" {
				t.Errorf("Default is not idempotent (-once +twice):\n%s", d)
			}
		})
	}
}

func TestKubeControllersDefaults(t *testing.T) {
	d := KubeControllersDefaults()
	kcc := &KubeControllersConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: d}
	if errs := kcc.Validate(); len(errs) > 0 {
		t.Fatalf("KubeControllersDefaults does not validate: %v", errs)
	}
	// Default() must not change the full default object.
	before := kcc.DeepCopy()
	kcc.Default()
	if diff := cmp.Diff(before, kcc); diff != "" {
		t.Errorf("Default changed KubeControllersDefaults (-before +after):\n%s", diff)
	}
	c := d.Controllers
	if c.Node == nil || c.Policy == nil || c.WorkloadEndpoint == nil || c.ServiceAccount == nil ||
		c.Namespace == nil || c.LoadBalancer == nil || c.Migration == nil {
		t.Fatalf("every controller should be enabled: %+v", c)
	}
	if got := c.Policy.ReconcilerPeriod.Duration; got != 5*time.Minute {
		t.Errorf("policy reconcilerPeriod = %v, want 5m", got)
	}
	if got := d.EtcdV3CompactionPeriod.Duration; got != 10*time.Minute {
		t.Errorf("etcdV3CompactionPeriod = %v, want 10m", got)
	}
	if c.Node.HostEndpoint.AutoCreate != "Disabled" || c.Node.SyncLabels != "Enabled" {
		t.Errorf("node controller = %+v, want autoCreate Disabled and syncLabels Enabled", c.Node)
	}
	// Each call is independent.
	c.Node.ReconcilerPeriod.Duration = time.Second
	if KubeControllersDefaults().Controllers.Node.ReconcilerPeriod.Duration != 5*time.Minute {
		t.Error("KubeControllersDefaults returned shared data")
	}
}

func TestKubeControllersConfigurationValidate(t *testing.T) {
	tmpl := func(ts ...Template) KubeControllersConfigurationSpec {
		return KubeControllersConfigurationSpec{Controllers: ControllersConfig{Node: &NodeControllerConfig{
			HostEndpoint: &AutoHostEndpointConfig{AutoCreate: "Enabled", Templates: ts},
		}}}
	}
	tests := []struct {
		name     string
		cfgName  string
		spec     KubeControllersConfigurationSpec
		status   KubeControllersConfigurationStatus
		wantErrs []string
	}{
		{name: "empty", spec: KubeControllersConfigurationSpec{}},
		{
			name:     "only default is allowed",
			cfgName:  "other",
			wantErrs: []string{`metadata.name: must be "default" (there is one KubeControllersConfiguration per cluster), got "other"`},
		},
		{
			name: "templates: pattern-only and CIDR-only are both fine",
			spec: tmpl(
				Template{GenerateName: "bond", InterfacePattern: "^bond[0-9]+$"},
				Template{GenerateName: "storage", InterfaceCIDRs: []string{"10.0.0.0/8"}, NodeSelector: "has(storage)", Labels: map[string]string{"net": "storage"}},
			),
		},
		{
			name: "templates: every rule",
			spec: tmpl(
				Template{GenerateName: "a", InterfaceCIDRs: []string{"10.0.0.0/8"}},
				Template{GenerateName: "a", InterfacePattern: "("},
				Template{GenerateName: strings.Repeat("x", 254), InterfaceCIDRs: []string{"10.0.0.0/8"}},
				Template{GenerateName: "b", Labels: map[string]string{"bad key!": "v"}, NodeSelector: "has("},
			),
			wantErrs: []string{
				`spec.controllers.node.hostEndpoint.templates[1].generateName: "a" is already used by templates[0]; template names must be unique`,
				"spec.controllers.node.hostEndpoint.templates[1].interfacePattern: \"(\" is not a valid regular expression: error parsing regexp: missing closing ): `(`",
				`spec.controllers.node.hostEndpoint.templates[2].generateName: is 254 characters long; at most 253 are allowed`,
				`spec.controllers.node.hostEndpoint.templates[3]: must set interfaceCIDRs or interfacePattern (or both)`,
			},
		},
		{
			name: "status running config is checked like a spec",
			status: KubeControllersConfigurationStatus{
				RunningConfig: &KubeControllersConfigurationSpec{LogSeverityScreen: "Verbose"},
			},
			wantErrs: []string{`status.runningConfig.logSeverityScreen: "Verbose" is not one of None, Debug, Info, Warning, Error, Fatal, Panic`},
		},
		{
			name:     "debug profile port range",
			spec:     KubeControllersConfigurationSpec{DebugProfilePort: new(int32(70000))},
			wantErrs: []string{`spec.debugProfilePort: 70000 is outside 0-65535`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.cfgName
			if name == "" {
				name = "default"
			}
			kcc := &KubeControllersConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tt.spec, Status: tt.status}
			got := cfgErrStrings(kcc.Validate())
			// Label and selector messages come from other packages: match
			// those by prefix only.
			got = cfgTrimForeign(got)
			if d := cmp.Diff(tt.wantErrs, got); d != "" {
				t.Errorf("Validate errors (-want +got):\n%s", d)
			}
		})
	}
}

// cfgTrimForeign drops label and selector errors, whose wording belongs to
// k8s validation and api/selector; it checks they are present where the
// "every rule" case expects them.
func cfgTrimForeign(errs []string) []string {
	var out []string
	for _, e := range errs {
		if strings.Contains(e, ".labels[") || strings.Contains(e, ".nodeSelector:") {
			continue
		}
		out = append(out, e)
	}
	return out
}

func TestKubeControllersConfigurationForeignErrors(t *testing.T) {
	kcc := &KubeControllersConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	kcc.Spec.Controllers.Node = &NodeControllerConfig{HostEndpoint: &AutoHostEndpointConfig{Templates: []Template{
		{GenerateName: "b", InterfacePattern: "^b$", Labels: map[string]string{"bad key!": "v"}, NodeSelector: "has("},
	}}}
	got := strings.Join(cfgErrStrings(kcc.Validate()), "\n")
	for _, want := range []string{
		`spec.controllers.node.hostEndpoint.templates[0].labels["bad key!"]: invalid label key`,
		`spec.controllers.node.hostEndpoint.templates[0].nodeSelector: invalid selector "has("`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q\ndo not contain %q", got, want)
		}
	}
}

func TestKubeControllersConfigurationEncodeOmitsEmptyStatus(t *testing.T) {
	kcc := &KubeControllersConfiguration{
		TypeMeta:   typeMeta(KindKubeControllersConfiguration),
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       KubeControllersConfigurationSpec{LogSeverityScreen: "Info"},
	}
	js, err := EncodeJSON(kcc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"projectcalico.org/v3","kind":"KubeControllersConfiguration","metadata":{"name":"default"},"spec":{"controllers":{},"logSeverityScreen":"Info"}}`
	if string(js) != want {
		t.Errorf("EncodeJSON =\n%s\nwant\n%s", js, want)
	}
}

// TestKubeControllersCorpusCoversEveryField checks the valid corpus sets
// every field of KubeControllersConfiguration's spec and status (the running
// config has the spec's type, so it counts as one field).
func TestKubeControllersCorpusCoversEveryField(t *testing.T) {
	cfgCheckCorpusCoverage(t, KindKubeControllersConfiguration, reflect.TypeFor[KubeControllersConfiguration](),
		map[string]bool{"status.runningConfig": true})
}
