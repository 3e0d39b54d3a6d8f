package dsconfig

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Datastore types, as Calico spells them.
const (
	TypeEtcdV3     = "etcdv3"
	TypeKubernetes = "kubernetes"
)

// DefaultConfigFile is where calicoctl looks when --config is not given.
const DefaultConfigFile = "/etc/calico/calicoctl.cfg"

// ErrNotConfigured means neither a config file nor the environment says
// which datastore to use.
var ErrNotConfigured = errors.New("no datastore configured")

// Spec is the spec of a CalicoAPIConfig (field names as Calico's).
type Spec struct {
	DatastoreType string `json:"datastoreType,omitempty"`

	EtcdEndpoints    string `json:"etcdEndpoints,omitempty"`
	EtcdDiscoverySrv string `json:"etcdDiscoverySrv,omitempty"`
	EtcdUsername     string `json:"etcdUsername,omitempty"`
	EtcdPassword     string `json:"etcdPassword,omitempty"`
	EtcdKeyFile      string `json:"etcdKeyFile,omitempty"`
	EtcdCertFile     string `json:"etcdCertFile,omitempty"`
	EtcdCACertFile   string `json:"etcdCACertFile,omitempty"`
	// The same PEM inline; as in Calico, no environment variables set
	// these (a key in the environment leaks too easily).
	EtcdKey    string `json:"etcdKey,omitempty"`
	EtcdCert   string `json:"etcdCert,omitempty"`
	EtcdCACert string `json:"etcdCACert,omitempty"`

	Kubeconfig               string `json:"kubeconfig,omitempty"`
	K8sAPIEndpoint           string `json:"k8sAPIEndpoint,omitempty"`
	K8sKeyFile               string `json:"k8sKeyFile,omitempty"`
	K8sCertFile              string `json:"k8sCertFile,omitempty"`
	K8sCAFile                string `json:"k8sCAFile,omitempty"`
	K8sAPIToken              string `json:"k8sAPIToken,omitempty"`
	K8sInsecureSkipTLSVerify bool   `json:"k8sInsecureSkipTLSVerify,omitempty"`
	// The rest of Calico's KubeConfig fields, accepted in the file and the
	// environment as Calico accepts them. KubeconfigInline is the
	// kubeconfig's content (no environment variable, as in Calico);
	// K8sCurrentContext picks a context of the kubeconfig (calicoctl
	// --context sets it).
	K8sDisableNodePoll bool    `json:"k8sDisableNodePoll,omitempty"`
	K8sUsePodCIDR      bool    `json:"usePodCIDR,omitempty"`
	KubeconfigInline   string  `json:"kubeconfigInline,omitempty"`
	K8sClientQPS       float32 `json:"k8sClientQPS,omitempty"`
	K8sClientBurst     int     `json:"k8sClientBurst,omitempty"`
	K8sCurrentContext  string  `json:"k8sCurrentContext,omitempty"`
	CalicoAPIGroup     string  `json:"calicoAPIGroup,omitempty"`

	// RequestTimeout bounds each datastore request (0: the backend's
	// default). Not part of the file format: components set it.
	RequestTimeout time.Duration `json:"-"`
	// OneCall says the client serves one short call and exits (the CNI
	// plugin): the Kubernetes datastore then sends everything over one
	// HTTP/2 connection, dialled once. Not part of the file format.
	OneCall bool `json:"-"`
	// TLSSessionFile, for a OneCall client of the Kubernetes datastore,
	// is where its TLS session is kept for the next process to resume
	// (datastore/kdd/tlssession.go). Not part of the file format.
	TLSSessionFile string `json:"-"`
}

// APIConfig is the CalicoAPIConfig document.
type APIConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	Spec       Spec           `json:"spec"`
}

// envVars maps each environment variable to the field it sets. Calico
// also accepts the upper-snake form of each spec field; these are the ones
// its documentation names.
var envVars = []struct {
	name string
	set  func(*Spec, string) error
}{
	{"DATASTORE_TYPE", func(s *Spec, v string) error { s.DatastoreType = v; return nil }},
	{"ETCD_ENDPOINTS", func(s *Spec, v string) error { s.EtcdEndpoints = v; return nil }},
	{"ETCD_DISCOVERY_SRV", func(s *Spec, v string) error { s.EtcdDiscoverySrv = v; return nil }},
	{"ETCD_USERNAME", func(s *Spec, v string) error { s.EtcdUsername = v; return nil }},
	{"ETCD_PASSWORD", func(s *Spec, v string) error { s.EtcdPassword = v; return nil }},
	{"ETCD_KEY_FILE", func(s *Spec, v string) error { s.EtcdKeyFile = v; return nil }},
	{"ETCD_CERT_FILE", func(s *Spec, v string) error { s.EtcdCertFile = v; return nil }},
	{"ETCD_CA_CERT_FILE", func(s *Spec, v string) error { s.EtcdCACertFile = v; return nil }},
	{"KUBECONFIG", func(s *Spec, v string) error { s.Kubeconfig = v; return nil }},
	{"K8S_API_ENDPOINT", func(s *Spec, v string) error { s.K8sAPIEndpoint = v; return nil }},
	{"K8S_KEY_FILE", func(s *Spec, v string) error { s.K8sKeyFile = v; return nil }},
	{"K8S_CERT_FILE", func(s *Spec, v string) error { s.K8sCertFile = v; return nil }},
	{"K8S_CA_FILE", func(s *Spec, v string) error { s.K8sCAFile = v; return nil }},
	{"K8S_API_TOKEN", func(s *Spec, v string) error { s.K8sAPIToken = v; return nil }},
	{"K8S_INSECURE_SKIP_TLS_VERIFY", func(s *Spec, v string) error { s.K8sInsecureSkipTLSVerify = v == "true"; return nil }},
	{"K8S_DISABLE_NODE_POLL", func(s *Spec, v string) error { s.K8sDisableNodePoll = v == "true"; return nil }},
	{"USE_POD_CIDR", func(s *Spec, v string) error { s.K8sUsePodCIDR = v == "true"; return nil }},
	{"K8S_CLIENT_QPS", func(s *Spec, v string) error {
		f, err := strconv.ParseFloat(v, 32)
		s.K8sClientQPS = float32(f)
		return err
	}},
	{"K8S_CLIENT_BURST", func(s *Spec, v string) (err error) {
		s.K8sClientBurst, err = strconv.Atoi(v)
		return err
	}},
	{"K8S_CURRENT_CONTEXT", func(s *Spec, v string) error { s.K8sCurrentContext = v; return nil }},
	{"CALICO_API_GROUP", func(s *Spec, v string) error { s.CalicoAPIGroup = v; return nil }},
}

// Load reads the config file at path (if it exists; a missing file is not
// an error unless explicit is true) and then applies the environment.
// It fails with ErrNotConfigured when nothing names a datastore.
func Load(path string, explicit bool, getenv func(string) string) (Spec, error) {
	var spec Spec
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		cfg, err := Parse(data)
		if err != nil {
			return Spec{}, fmt.Errorf("config file %s: %w", path, err)
		}
		spec = cfg.Spec
	case explicit || !errors.Is(err, os.ErrNotExist):
		return Spec{}, fmt.Errorf("reading config file: %w", err)
	}
	for _, ev := range envVars {
		if v := getenv(ev.name); v != "" {
			if err := ev.set(&spec, v); err != nil {
				return Spec{}, fmt.Errorf("environment variable %s=%q: %w", ev.name, v, err)
			}
		}
	}
	if spec.DatastoreType == "" {
		switch {
		case spec.EtcdEndpoints != "" || spec.EtcdDiscoverySrv != "":
			spec.DatastoreType = TypeEtcdV3
		case spec.Kubeconfig != "" || spec.KubeconfigInline != "" || spec.K8sAPIEndpoint != "":
			spec.DatastoreType = TypeKubernetes
		default:
			return Spec{}, fmt.Errorf("%w: set DATASTORE_TYPE=etcdv3 with ETCD_ENDPOINTS, or DATASTORE_TYPE=kubernetes with KUBECONFIG, or write %s (kind CalicoAPIConfig)", ErrNotConfigured, path)
		}
	}
	return spec, spec.Validate()
}

// Parse decodes a CalicoAPIConfig document strictly.
func Parse(data []byte) (APIConfig, error) {
	var cfg APIConfig
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return APIConfig{}, fmt.Errorf("not valid YAML: %w", err)
	}
	strict, err := kjson.UnmarshalStrict(js, &cfg, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err == nil && len(strict) > 0 {
		err = strict[0]
	}
	if err != nil {
		return APIConfig{}, fmt.Errorf("not a valid CalicoAPIConfig: %w", err)
	}
	if cfg.Kind != "CalicoAPIConfig" {
		return APIConfig{}, fmt.Errorf("kind is %q, want CalicoAPIConfig", cfg.Kind)
	}
	if cfg.APIVersion != "projectcalico.org/v3" {
		return APIConfig{}, fmt.Errorf("apiVersion is %q, want projectcalico.org/v3", cfg.APIVersion)
	}
	return cfg, nil
}

// Validate checks the spec names a usable datastore.
func (s Spec) Validate() error {
	switch s.DatastoreType {
	case TypeEtcdV3:
		if len(s.Endpoints()) == 0 && s.EtcdDiscoverySrv == "" {
			return fmt.Errorf("%w: datastoreType etcdv3 needs etcdEndpoints (ETCD_ENDPOINTS), e.g. http://127.0.0.1:2379, or etcdDiscoverySrv (ETCD_DISCOVERY_SRV)", ErrNotConfigured)
		}
	case TypeKubernetes:
		if s.Kubeconfig == "" && s.KubeconfigInline == "" && s.K8sAPIEndpoint == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
			return fmt.Errorf("%w: datastoreType kubernetes needs kubeconfig (KUBECONFIG) or k8sAPIEndpoint, or must run in a pod", ErrNotConfigured)
		}
	default:
		return fmt.Errorf("datastoreType %q is not supported: use %s or %s", s.DatastoreType, TypeEtcdV3, TypeKubernetes)
	}
	return nil
}

// Endpoints splits the comma-separated etcd endpoint list.
func (s Spec) Endpoints() []string {
	var out []string
	for _, e := range strings.Split(s.EtcdEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
