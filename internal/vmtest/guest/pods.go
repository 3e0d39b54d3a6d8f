package guest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// podNetns names a pod's namespace in the VM: pod-<name> in "default",
// else pod-<namespace>-<name>.
func podNetns(key string) string {
	ns, name, ok := strings.Cut(key, "/")
	switch {
	case !ok:
		return "pod-" + key
	case ns == "default":
		return "pod-" + name
	}
	return "pod-" + ns + "-" + name
}

// podKey is "<namespace>/<name>" for a key or a bare name (in "default").
func podKey(key string) string {
	if strings.Contains(key, "/") {
		return key
	}
	return "default/" + key
}

// AddPod creates the pod's namespace, runs CNI ADD from the node (the
// plugin's own wait for felix's endpoint status included) and starts the
// pod's TCP and UDP servers.
func (a *Agent) AddPod(r PodRequest) (PodResult, error) {
	if r.Namespace == "" {
		r.Namespace = "default"
	}
	name := podNetns(r.Key())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return PodResult{}, fmt.Errorf("ip netns add %s: %w: %s", name, err, out)
	}
	n, err := ns.GetNS(filepath.Join("/run/netns", name))
	if err != nil {
		return PodResult{}, err
	}
	p := &pod{ns: n, rt: &libcni.RuntimeConf{
		ContainerID: "cid-" + a.Me.Name + "-" + r.Namespace + "-" + r.Name, NetNS: n.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", r.Namespace}, {"K8S_POD_NAME", r.Name}},
	}}
	start := time.Now()
	res, err := a.cni.AddNetworkList(context.Background(), a.list, p.rt)
	took := time.Since(start)
	if err != nil {
		return PodResult{}, fmt.Errorf("CNI ADD %s: %w", r.Name, err)
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		return PodResult{}, err
	}
	ip, err := result4(cur)
	if err != nil {
		return PodResult{}, err
	}
	if len(r.Serve) > 0 {
		err = a.Spawn(SpawnRequest{Name: "serve-" + name, Argv: append([]string{"ip", "netns", "exec", name}, r.Serve...)})
	} else {
		err = p.serve(r.Name)
	}
	if err != nil {
		return PodResult{}, err
	}
	a.mu.Lock()
	a.pods[r.Key()] = p
	a.mu.Unlock()
	return PodResult{IP: ip.String(), AddMillis: took.Milliseconds()}, nil
}

// serve starts the pod's servers: TCP answering with the pod's name, UDP
// echoing it (with the datagram's size, for MTU probes).
func (p *pod) serve(name string) error {
	ln, err := netnstest.ListenTCP(p.ns, fmt.Sprintf(":%d", TCPPort), name)
	if err != nil {
		return err
	}
	p.closers = append(p.closers, func() { ln.Close() })
	var pc net.PacketConn
	if err := p.ns.Do(func(ns.NetNS) error {
		var err error
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", UDPPort))
		return err
	}); err != nil {
		return err
	}
	p.closers = append(p.closers, func() { pc.Close() })
	var sink net.Listener
	if err := p.ns.Do(func(ns.NetNS) error {
		var err error
		sink, err = net.Listen("tcp4", fmt.Sprintf(":%d", SinkPort))
		return err
	}); err != nil {
		return err
	}
	p.closers = append(p.closers, func() { sink.Close() })
	go serveSink(sink)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+" "+strconv.Itoa(n)), from)
		}
	}()
	return nil
}

// DelPod runs CNI DEL and removes the pod's namespace.
func (a *Agent) DelPod(r PodRequest) error {
	a.mu.Lock()
	p, ok := a.pods[r.Key()]
	delete(a.pods, r.Key())
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("no pod %s", r.Name)
	}
	for _, c := range p.closers {
		c()
	}
	if err := a.cni.DelNetworkList(context.Background(), a.list, p.rt); err != nil {
		return fmt.Errorf("CNI DEL %s: %w", r.Name, err)
	}
	_ = p.ns.Close()
	if out, err := exec.Command("ip", "netns", "del", podNetns(r.Key())).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del: %w: %s", err, out)
	}
	return nil
}

// Probe tries one flow from a pod (see ProbeRequest).
func (a *Agent) Probe(r ProbeRequest) (ProbeResult, error) {
	a.mu.Lock()
	p, ok := a.pods[podKey(r.From)]
	a.mu.Unlock()
	if !ok {
		return ProbeResult{}, fmt.Errorf("no pod %s", r.From)
	}
	d := time.Duration(r.TimeoutMillis) * time.Millisecond
	if d == 0 {
		d = 2 * time.Second
	}
	var reply string
	var err error
	port := func(def int) string {
		if r.Port != 0 {
			def = r.Port
		}
		return net.JoinHostPort(r.Dst, strconv.Itoa(def))
	}
	switch r.Proto {
	case "tcp":
		reply, err = tcpProbe(p.ns, port(TCPPort), d)
	case "udp":
		reply, err = udpProbe(p.ns, port(UDPPort), r.Size, d)
	case "icmp":
		err = netnstest.Ping(p.ns, r.Dst, int(time.Now().UnixNano()&0x7fff), d)
	default:
		return ProbeResult{}, fmt.Errorf("probe: unknown protocol %q", r.Proto)
	}
	reply = strings.TrimSpace(reply)
	switch {
	case err != nil:
		return ProbeResult{Error: err.Error()}, nil
	case r.Want != "" && reply != r.Want:
		return ProbeResult{Reply: reply, Error: "answered by " + strconv.Quote(reply)}, nil
	}
	return ProbeResult{Reply: reply}, nil
}

// Probes runs several probes at once and returns their results in order.
func (a *Agent) Probes(rs []ProbeRequest) ([]ProbeResult, error) {
	out := make([]ProbeResult, len(rs))
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = a.Probe(r)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// tcpProbe connects and reads the server's first line (the pod's
// servers close after it; the lab's keep it open).
func tcpProbe(n ns.NetNS, addr string, d time.Duration) (string, error) {
	var got string
	err := n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, d)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(d))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
			return err
		}
		got = line
		return nil
	})
	return got, err
}

// udpProbe sends one datagram of size bytes (at least 1; Don't Fragment
// set, so a payload over the path MTU fails instead of being split) and
// waits for the answer.
func udpProbe(n ns.NetNS, addr string, size int, d time.Duration) (string, error) {
	if size < 1 {
		size = 1
	}
	var got string
	err := n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("udp4", addr, d)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := setDontFragment(c.(*net.UDPConn)); err != nil {
			return err
		}
		_ = c.SetDeadline(time.Now().Add(d))
		if _, err := c.Write(make([]byte, size)); err != nil {
			return err
		}
		buf := make([]byte, 512)
		k, err := c.Read(buf)
		if err != nil {
			return err
		}
		got = string(buf[:k])
		return nil
	})
	return got, err
}

func setDontFragment(c *net.UDPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_DO)
	}); err != nil {
		return err
	}
	if serr != nil {
		return errors.Join(errors.New("setting Don't Fragment"), serr)
	}
	return nil
}

// serveSink answers each connection, once its sender closed its side,
// with the number of bytes it sent.
func serveSink(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			n, _ := io.Copy(io.Discard, c)
			_, _ = fmt.Fprintf(c, "%d\n", n)
		}()
	}
}

// Stream sends zeros from pod r.From to r.Dst's sink for r.Millis and
// returns what the sink counted (a throughput probe).
func (a *Agent) Stream(r StreamRequest) (StreamResult, error) {
	a.mu.Lock()
	p, ok := a.pods[podKey(r.From)]
	a.mu.Unlock()
	if !ok {
		return StreamResult{}, fmt.Errorf("no pod %s", r.From)
	}
	var res StreamResult
	err := p.ns.Do(func(ns.NetNS) error {
		start := time.Now()
		c, err := net.DialTimeout("tcp", net.JoinHostPort(r.Dst, strconv.Itoa(SinkPort)), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 128<<10)
		_ = c.SetWriteDeadline(start.Add(time.Duration(r.Millis) * time.Millisecond))
		last := time.Now()
		for {
			_, err := c.Write(buf)
			now := time.Now()
			res.MaxGapMicros = max(res.MaxGapMicros, now.Sub(last).Microseconds())
			last = now
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					res.WriteError = err.Error()
				}
				break
			}
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the sink's count: %w", err)
		}
		res.Micros = time.Since(start).Microseconds()
		res.Bytes, err = strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		return err
	})
	return res, err
}
