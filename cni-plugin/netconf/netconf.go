package netconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/pkg/types"
)

// Datastore types.
const (
	DatastoreEtcdV3     = "etcdv3"
	DatastoreKubernetes = "kubernetes"
)

// DefaultMTU is used when the config sets none (Calico's default).
const DefaultMTU = 1500

// DefaultMTUFile is where calico-node (felix) writes the MTU pods should
// use, detected from the host's interfaces minus the encapsulation
// overhead; read when the config sets no mtu.
const DefaultMTUFile = "/var/lib/calico/mtu"

// DefaultNodenameFile is where calico-node writes the node name.
const DefaultNodenameFile = "/var/lib/calico/nodename"

// Kubernetes holds the `kubernetes` section.
type Kubernetes struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	K8sAPIRoot string `json:"k8s_api_root,omitempty"`
}

// Policy holds the `policy` section.
type Policy struct {
	PolicyType string `json:"type,omitempty"`
}

// ContainerSettings holds `container_settings`.
type ContainerSettings struct {
	AllowIPForwarding bool `json:"allow_ip_forwarding,omitempty"`
}

// NetConf is the calico plugin's configuration.
type NetConf struct {
	types.PluginConf

	// PrevResult is kept undecoded: only CHECK reads it (DecodePrevResult),
	// so a garbage prevResult can never stop a DEL. It hides
	// PluginConf's RawPrevResult from the decoder.
	PrevResultJSON json.RawMessage `json:"prevResult,omitempty"`

	DatastoreType  string `json:"datastore_type,omitempty"`
	EtcdEndpoints  string `json:"etcd_endpoints,omitempty"`
	EtcdDiscovery  string `json:"etcd_discovery_srv,omitempty"`
	EtcdKeyFile    string `json:"etcd_key_file,omitempty"`
	EtcdCertFile   string `json:"etcd_cert_file,omitempty"`
	EtcdCaCertFile string `json:"etcd_ca_cert_file,omitempty"`

	Kubernetes Kubernetes `json:"kubernetes,omitempty"`
	Policy     Policy     `json:"policy,omitempty"`

	Nodename             string `json:"nodename,omitempty"`
	NodenameFile         string `json:"nodename_file,omitempty"`
	NodenameFileOptional bool   `json:"nodename_file_optional,omitempty"`

	MTU int `json:"mtu,omitempty"`
	// RequireMTUFile: with mtu unset, ADD fails while calico-node has not
	// written its MTU file (instead of falling back to DefaultMTU).
	RequireMTUFile    bool              `json:"require_mtu_file,omitempty"`
	ContainerSettings ContainerSettings `json:"container_settings,omitempty"`
	LogLevel          string            `json:"log_level,omitempty"`
	LogFilePath       string            `json:"log_file_path,omitempty"`
	// The log file's rotation (cni-plugin/cnilog): MB, days, files kept;
	// 0 for Calico's defaults (100, 30, 10).
	LogFileMaxSize  int `json:"log_file_max_size,omitempty"`
	LogFileMaxAge   int `json:"log_file_max_age,omitempty"`
	LogFileMaxCount int `json:"log_file_max_count,omitempty"`

	// Calico's IPAM plugin reads these from the same config.
	IncludeDefaultRoutes bool `json:"include_default_routes,omitempty"`
	FeatureControl       struct {
		IPAddrsNoIpam bool `json:"ip_addrs_no_ipam,omitempty"`
		FloatingIPs   bool `json:"floating_ips,omitempty"`
	} `json:"feature_control,omitempty"`
	NumQueues int `json:"num_queues,omitempty"`

	// PolicySetupTimeoutSeconds > 0 makes ADD wait (up to that long) for
	// felix's status file of the endpoint in EndpointStatusDir, i.e. for
	// its policy to be programmed [default 0: no wait].
	PolicySetupTimeoutSeconds int    `json:"policy_setup_timeout_seconds,omitempty"`
	EndpointStatusDir         string `json:"endpoint_status_dir,omitempty"`
}

// DefaultEndpointStatusDir is where felix writes endpoint status files
// (its EndpointStatusPathPrefix /var/run/calico + endpoint-status).
const DefaultEndpointStatusDir = "/var/run/calico/endpoint-status"

// Error is a configuration error carrying its CNI error code.
type Error struct {
	Code  uint // types.ErrDecodingFailure, types.ErrInvalidNetworkConfig, ...
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// CNI turns the error into the CNI spec's error object.
func (e *Error) CNI() *types.Error {
	return types.NewError(e.Code, e.Error(), "")
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: types.ErrInvalidNetworkConfig, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Parse decodes and validates a network configuration, filling Calico's
// defaults. Errors are *Error with code 6 (decode) or 7 (invalid).
func Parse(data []byte) (*NetConf, error) {
	var c NetConf
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, &Error{Code: types.ErrDecodingFailure, Msg: "network configuration is not valid JSON: " + err.Error()}
	}
	if err := c.defaultAndValidate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *NetConf) defaultAndValidate() error {
	if c.PolicySetupTimeoutSeconds < 0 {
		return invalid("policy_setup_timeout_seconds", "%d is negative (0 disables the wait)", c.PolicySetupTimeoutSeconds)
	}
	if c.EndpointStatusDir == "" {
		c.EndpointStatusDir = DefaultEndpointStatusDir
	}
	if c.Name == "" {
		return invalid("name", "is required (the network's name)")
	}
	if c.Type == "" {
		return invalid("type", "is required")
	}
	if c.DatastoreType == "" {
		c.DatastoreType = DatastoreEtcdV3
		if c.EtcdEndpoints == "" && (c.Kubernetes.Kubeconfig != "" || c.Kubernetes.K8sAPIRoot != "") {
			c.DatastoreType = DatastoreKubernetes
		}
	}
	switch c.DatastoreType {
	case DatastoreEtcdV3:
		if c.EtcdEndpoints == "" && c.EtcdDiscovery == "" {
			return invalid("etcd_endpoints", "is required with datastore_type etcdv3 (e.g. \"http://127.0.0.1:2379\")")
		}
		for _, ep := range c.Endpoints() {
			if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") && !strings.HasPrefix(ep, "unix://") && !strings.HasPrefix(ep, "unixs://") {
				return invalid("etcd_endpoints", "%q is not an http://, https://, unix:// or unixs:// URL", ep)
			}
		}
	case DatastoreKubernetes:
		if c.Kubernetes.Kubeconfig == "" && c.Kubernetes.K8sAPIRoot == "" {
			return invalid("kubernetes.kubeconfig", "is required with datastore_type kubernetes")
		}
	default:
		return invalid("datastore_type", "%q is not supported: use %q or %q", c.DatastoreType, DatastoreEtcdV3, DatastoreKubernetes)
	}
	// mtu 0 (or unset) is resolved at ADD (ResolveMTU): calico-node's MTU
	// file, else DefaultMTU.
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
		return invalid("mtu", "%d is outside 576-65535", c.MTU)
	}
	if c.IPAM.Type == "" {
		return invalid("ipam.type", "is required (calico-ipam, or another IPAM plugin such as host-local)")
	}
	if c.Policy.PolicyType != "" && c.Policy.PolicyType != "k8s" {
		return invalid("policy.type", "%q is not supported: use \"k8s\" or leave it out", c.Policy.PolicyType)
	}
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warning", "warn", "error", "fatal", "panic":
	default:
		return invalid("log_level", "%q is not one of debug, info, warning, error", c.LogLevel)
	}
	for field, v := range map[string]int{"log_file_max_size": c.LogFileMaxSize, "log_file_max_age": c.LogFileMaxAge, "log_file_max_count": c.LogFileMaxCount} {
		if v < 0 {
			return invalid(field, "%d is negative (0 for the default)", v)
		}
	}
	if c.NodenameFile == "" {
		c.NodenameFile = DefaultNodenameFile
	}
	return nil
}

// DecodePrevResult decodes prevResult into PluginConf's RawPrevResult
// (nil when there is none), as CHECK needs it.
func (c *NetConf) DecodePrevResult() error {
	c.RawPrevResult = nil
	if len(c.PrevResultJSON) == 0 || string(c.PrevResultJSON) == "null" {
		return nil
	}
	if err := json.Unmarshal(c.PrevResultJSON, &c.RawPrevResult); err != nil {
		return &Error{Code: types.ErrDecodingFailure, Field: "prevResult", Msg: "is not a CNI result: " + err.Error()}
	}
	return nil
}

// Endpoints splits etcd_endpoints.
func (c *NetConf) Endpoints() []string { return SplitEndpoints(c.EtcdEndpoints) }

// SplitEndpoints splits a comma-separated endpoint list, dropping blanks.
func SplitEndpoints(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// ResolveNodename returns the node name as Calico determines it: the
// `nodename` key, else the nodename file, else the hostname.
func (c *NetConf) ResolveNodename(hostname func() (string, error)) (string, error) {
	if c.Nodename != "" {
		return c.Nodename, nil
	}
	b, err := readSmallFile(c.NodenameFile, 4096)
	switch {
	case err == nil:
		if n := strings.TrimSpace(string(b)); n != "" {
			return n, nil
		}
	case errors.Is(err, os.ErrNotExist) && !c.nodenameFileRequired():
	default:
		return "", &Error{Code: types.ErrInvalidEnvironmentVariables, Field: "nodename_file",
			Msg: fmt.Sprintf("reading %s: %v (is calico-node running on this host? set nodename_file_optional to fall back to the hostname)", c.NodenameFile, err)}
	}
	h, err := hostname()
	if err != nil {
		return "", &Error{Code: types.ErrInternal, Msg: "determining the hostname: " + err.Error()}
	}
	return strings.ToLower(strings.TrimSpace(h)), nil
}

// ResolveMTU returns the MTU for the pod's interface as Calico's plugin
// determines it: the config's mtu, else the number in path (calico-node's
// MTU file), else DefaultMTU; with require_mtu_file a missing file is an
// error. A file that cannot be read or holds no usable MTU is an error,
// never silently replaced by the default.
func (c *NetConf) ResolveMTU(path string) (int, error) {
	if c.MTU != 0 {
		return c.MTU, nil
	}
	b, err := readSmallFile(path, 64)
	switch {
	case errors.Is(err, os.ErrNotExist) && !c.RequireMTUFile:
		return DefaultMTU, nil
	case err != nil:
		return 0, &Error{Code: types.ErrInvalidEnvironmentVariables, Field: "require_mtu_file",
			Msg: fmt.Sprintf("reading the MTU file %s: %v (is calico-node running on this host?)", path, err)}
	}
	mtu, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || mtu < 576 || mtu > 65535 {
		return 0, &Error{Code: types.ErrInvalidEnvironmentVariables, Field: "mtu",
			Msg: fmt.Sprintf("the MTU file %s holds %q, not an MTU in 576-65535", path, strings.TrimSpace(string(b)))}
	}
	return mtu, nil
}

// readSmallFile reads a regular file of at most max bytes without ever
// blocking (a FIFO or a device named by mistake is an error, not a
// stall).
func readSmallFile(path string, max int64) ([]byte, error) {
	// Never open anything but a regular file: opening some devices has
	// effects of its own.
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// nodenameFileRequired reports whether a missing nodename file is an
// error: only when the user pointed at one and did not mark it optional.
func (c *NetConf) nodenameFileRequired() bool {
	return c.NodenameFile != DefaultNodenameFile && !c.NodenameFileOptional
}

// Args are the CNI_ARGS Kubernetes runtimes pass.
type Args struct {
	types.CommonArgs
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive // CNI's names
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive
	K8S_POD_UID                types.UnmarshallableString //nolint:revive
}

// ParseArgs parses CNI_ARGS ("K=V;K=V"), ignoring unknown keys.
func ParseArgs(s string) (*Args, error) {
	a := &Args{}
	a.IgnoreUnknown = true
	if err := types.LoadArgs(s, a); err != nil {
		return nil, &Error{Code: types.ErrInvalidEnvironmentVariables, Field: "CNI_ARGS", Msg: err.Error()}
	}
	return a, nil
}

// IsKubernetes reports whether the runtime called on behalf of a pod.
func (a *Args) IsKubernetes() bool { return a.K8S_POD_NAME != "" && a.K8S_POD_NAMESPACE != "" }

// ValidatePod checks the pod's name and namespace as Kubernetes names
// them (a DNS-1123 subdomain of at most 253 characters, a DNS-1123 label
// of at most 63): anything else did not come from Kubernetes and cannot
// name a WorkloadEndpoint. Errors have code 4.
func (a *Args) ValidatePod() error {
	if !a.IsKubernetes() {
		return nil
	}
	if err := dns1123(string(a.K8S_POD_NAME), 253, true); err != "" {
		return &Error{Code: types.ErrInvalidEnvironmentVariables, Field: "CNI_ARGS K8S_POD_NAME",
			Msg: fmt.Sprintf("%q is not a Kubernetes pod name: %s", truncate(string(a.K8S_POD_NAME)), err)}
	}
	if err := dns1123(string(a.K8S_POD_NAMESPACE), 63, false); err != "" {
		return &Error{Code: types.ErrInvalidEnvironmentVariables, Field: "CNI_ARGS K8S_POD_NAMESPACE",
			Msg: fmt.Sprintf("%q is not a Kubernetes namespace: %s", truncate(string(a.K8S_POD_NAMESPACE)), err)}
	}
	return nil
}

// dns1123 checks s as a DNS-1123 label (or, with dots, a subdomain) of at
// most max characters and says what is wrong ("" when nothing is).
func dns1123(s string, max int, dots bool) string {
	if len(s) > max {
		return fmt.Sprintf("longer than %d characters", max)
	}
	for i, label := range strings.Split(s, ".") {
		if i > 0 && !dots {
			return "contains '.'"
		}
		if label == "" {
			return "has an empty part"
		}
		for j := 0; j < len(label); j++ {
			ch := label[j]
			switch {
			case ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9':
			case ch == '-' && j > 0 && j < len(label)-1:
			default:
				return fmt.Sprintf("%q is not allowed there: lowercase letters, digits and inner '-' only", string(ch))
			}
		}
	}
	return ""
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ParseIPList parses a JSON list of IPs, as in the ipAddrs annotation.
func ParseIPList(field, s string) ([]net.IP, error) {
	var raw []string
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, invalid(field, "%q is not a JSON list of addresses: %v", s, err)
	}
	out := make([]net.IP, 0, len(raw))
	for _, r := range raw {
		ip := net.ParseIP(r)
		if ip == nil {
			return nil, invalid(field, "%q is not an IP address", r)
		}
		out = append(out, ip)
	}
	return out, nil
}
