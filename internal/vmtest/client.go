package vmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tabbynet/tabby/internal/vmtest/guest"
)

// Guest calls one VM's agent (package guest) over the segment: the
// harness's and the lab's one way into a VM.
type Guest struct {
	base string
	hc   *http.Client
}

// NewGuest is the agent of the VM whose underlay address is addr.
func NewGuest(seg *Segment, addr netip.Addr) *Guest {
	tr := &http.Transport{DialContext: seg.DialContext, DisableKeepAlives: true}
	return &Guest{base: "http://" + net.JoinHostPort(addr.String(), strconv.Itoa(guest.ControlPort)), hc: &http.Client{Transport: tr}}
}

// Call posts req as JSON to path and decodes the answer into res.
func (c *Guest) Call(ctx context.Context, path string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if res == nil {
		return nil
	}
	return json.Unmarshal(body, res)
}

// CallTimeout is Call bounded by d.
func (c *Guest) CallTimeout(d time.Duration, path string, req, res any) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Call(ctx, path, req, res)
}

// Exec runs a command in the VM (in a pod's namespace with r.Pod).
func (c *Guest) Exec(r guest.ExecRequest) (guest.ExecResult, error) {
	var res guest.ExecResult
	err := c.CallTimeout(2*time.Minute, "/exec", r, &res)
	return res, err
}

// Exec runs argv on the node and returns its output; a non-zero exit is
// an error carrying the output.
func (n *Node) Exec(argv ...string) (string, error) {
	r, err := n.Guest.Exec(guest.ExecRequest{Argv: argv})
	if err != nil {
		return "", err
	}
	if r.Code != 0 {
		return r.Output, fmt.Errorf("%s on %s: exit %d: %s", strings.Join(argv, " "), n.Name, r.Code, r.Output)
	}
	return r.Output, nil
}

// MustExec is Exec failing the test on an error.
func (n *Node) MustExec(argv ...string) string {
	n.c.t.Helper()
	out, err := n.Exec(argv...)
	if err != nil {
		n.c.t.Fatal(err)
	}
	return out
}

// Spawn starts a long-running process on the node (its log lands in the
// share as <name>-<id>.log).
func (n *Node) Spawn(name string, env []string, argv ...string) error {
	return n.Guest.CallTimeout(time.Minute, "/spawn", guest.SpawnRequest{Name: name, Argv: argv, Env: env}, nil)
}

// Pod is a pod on a node.
type Pod struct {
	Node *Node
	Name string
	IP   netip.Addr
	// Add is how long the CNI ADD took inside the VM (with the plugin's
	// wait for felix's endpoint status).
	Add time.Duration
}

// AddPod wires a pod by the real CNI plugin in the VM; it fails the test
// on an error.
func (n *Node) AddPod(name string) *Pod {
	n.c.t.Helper()
	var r guest.PodResult
	if err := n.Guest.CallTimeout(2*time.Minute, "/pod/add", guest.PodRequest{Name: name}, &r); err != nil {
		n.c.t.Fatalf("adding pod %s on %s: %v", name, n.Name, err)
	}
	ip, err := netip.ParseAddr(r.IP)
	if err != nil {
		n.c.t.Fatal(err)
	}
	return &Pod{Node: n, Name: name, IP: ip, Add: time.Duration(r.AddMillis) * time.Millisecond}
}

// Delete runs CNI DEL for the pod.
func (p *Pod) Delete() error {
	return p.Node.Guest.CallTimeout(time.Minute, "/pod/del", guest.PodRequest{Name: p.Name}, nil)
}

// Probe tries one flow from p to dst ("tcp", "udp" or "icmp"): the
// server's answer, or an error saying why none came.
func (p *Pod) Probe(proto string, dst netip.Addr, timeout time.Duration) (string, error) {
	return p.ProbeSize(proto, dst, 0, timeout)
}

// ProbeSize is Probe with a UDP payload of size bytes (Don't Fragment).
func (p *Pod) ProbeSize(proto string, dst netip.Addr, size int, timeout time.Duration) (string, error) {
	var r guest.ProbeResult
	req := guest.ProbeRequest{From: p.Name, Proto: proto, Dst: dst.String(), Size: size, TimeoutMillis: int(timeout.Milliseconds())}
	if err := p.Node.Guest.CallTimeout(timeout+30*time.Second, "/probe", req, &r); err != nil {
		return "", err
	}
	if r.Error != "" {
		return "", fmt.Errorf("%s %s -> %s: %s", proto, p.Name, dst, r.Error)
	}
	return r.Reply, nil
}

// StreamStats are what a stream from a pod achieved.
type StreamStats struct {
	Bytes int64
	Took  time.Duration
	// MaxGap is the longest a single write into the socket took (the
	// stream's longest stall); WriteError why the writes ended early.
	MaxGap     time.Duration
	WriteError string
}

// Mbits is the stream's throughput.
func (s StreamStats) Mbits() float64 { return float64(s.Bytes) * 8 / s.Took.Seconds() / 1e6 }

// Stream sends a TCP stream from p to dst's sink for d.
func (p *Pod) Stream(dst netip.Addr, d time.Duration) (StreamStats, error) {
	var r guest.StreamResult
	req := guest.StreamRequest{From: p.Name, Dst: dst.String(), Millis: int(d.Milliseconds())}
	if err := p.Node.Guest.CallTimeout(d+time.Minute, "/stream", req, &r); err != nil {
		return StreamStats{}, err
	}
	return StreamStats{Bytes: r.Bytes, Took: time.Duration(r.Micros) * time.Microsecond,
		MaxGap: time.Duration(r.MaxGapMicros) * time.Microsecond, WriteError: r.WriteError}, nil
}

// quit asks the agent to stop; the guest then powers off.
func (n *Node) quit() error {
	return n.Guest.CallTimeout(5*time.Second, "/quit", struct{}{}, nil)
}
