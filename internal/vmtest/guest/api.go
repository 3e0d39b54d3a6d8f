// Package guest is the agent each VM of internal/vmtest runs
// (cmd/tabby-vmguest, started by the guest's init from the 9p share): it
// brings the VM's NIC up on the segment as its node's underlay address
// and answers the harness over HTTP on that address: spawn calico-node,
// run commands, add and delete pods with the real calico CNI plugin
// through libcni (as containerd does), and probe from a pod with TCP,
// UDP or ICMP. Each call is coarse: under software emulation a fork/exec
// costs ~24x what it costs on the host, so probes and servers run in the
// agent's own process.
package guest

// ControlPort is where the agent listens on its node's underlay address.
const ControlPort = 7070

// Config is the share's config.json: every node of the cluster.
type Config struct {
	Nodes []Node `json:"nodes"`
	// CNI is the calico plugin's network configuration (a conflist).
	CNI []byte `json:"cni"`
}

// Node is one VM: its node name, underlay address and gateway, and the
// MAC of its NIC (how the agent finds the NIC).
type Node struct {
	ID      int    `json:"id"`
	Name    string `json:"name"`
	Addr    string `json:"addr"` // with prefix length
	Gateway string `json:"gateway"`
	MAC     string `json:"mac"`
}

// ExecRequest runs Argv (in pod Pod's namespace when set); Env is added
// to the agent's environment.
type ExecRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	Pod  string   `json:"pod,omitempty"`
}

// ExecResult is a command's combined output and exit code.
type ExecResult struct {
	Output string `json:"output"`
	Code   int    `json:"code"`
}

// SpawnRequest starts a long-running process; its output goes to
// <share>/<Name>-<id>.log.
type SpawnRequest struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
}

// PodRequest names a pod (Kubernetes namespace "default" unless set).
// Serve, when set, is the pod's workload (run in its namespace, killed
// with the pod) instead of the agent's own TCP and UDP servers.
type PodRequest struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	Serve     []string `json:"serve,omitempty"`
}

// Key is the pod's "<namespace>/<name>".
func (r PodRequest) Key() string {
	if r.Namespace == "" {
		return "default/" + r.Name
	}
	return r.Namespace + "/" + r.Name
}

// PodResult is an added pod's IPv4 address and how long the ADD took.
type PodResult struct {
	IP        string `json:"ip"`
	AddMillis int64  `json:"addMillis"`
}

// ProbeRequest tries one flow from pod From ("<namespace>/<name>", or a
// name in "default"): tcp to Dst:80, udp to Dst:81 (or Port), or icmp
// echo to Dst, giving up after TimeoutMillis. With Want, an answer other
// than Want (trimmed) is an error.
type ProbeRequest struct {
	From          string `json:"from"`
	Port          int    `json:"port,omitempty"`
	Want          string `json:"want,omitempty"`
	Proto         string `json:"proto"`
	Dst           string `json:"dst"`
	Size          int    `json:"size,omitempty"` // udp payload bytes (with DF set)
	TimeoutMillis int    `json:"timeoutMillis"`
}

// ProbeResult is the server's reply (its pod's name), or why none came.
type ProbeResult struct {
	Reply string `json:"reply,omitempty"`
	Error string `json:"error,omitempty"`
}

// Ports the pods serve: TCP answers with the pod's name, UDP echoes it,
// SinkPort reads a TCP stream to its end and answers with its length.
const (
	TCPPort  = 80
	UDPPort  = 81
	SinkPort = 5001
)

// StreamRequest sends a TCP stream from pod From to Dst's sink for
// Millis milliseconds.
type StreamRequest struct {
	From   string `json:"from"`
	Dst    string `json:"dst"`
	Millis int    `json:"millis"`
}

// StreamResult is what the sink received and how long the stream took
// (from connect to the sink's answer); MaxGapMicros is the longest time
// one write into the socket took (the stream stalled: the socket's
// buffer stayed full), WriteError why writing ended early ("" when it
// ran its time).
type StreamResult struct {
	Bytes        int64  `json:"bytes"`
	Micros       int64  `json:"micros"`
	MaxGapMicros int64  `json:"maxGapMicros"`
	WriteError   string `json:"writeError,omitempty"`
}
