package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/internal/netnstest"
)

func podNetns(name string) string { return "pod-" + name }

// AddPod creates the pod's namespace, runs CNI ADD from the node (the
// plugin's own wait for felix's endpoint status included) and starts the
// pod's TCP and UDP servers.
func (a *Agent) AddPod(r PodRequest) (PodResult, error) {
	if r.Namespace == "" {
		r.Namespace = "default"
	}
	name := podNetns(r.Name)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return PodResult{}, fmt.Errorf("ip netns add %s: %w: %s", name, err, out)
	}
	n, err := ns.GetNS(filepath.Join("/run/netns", name))
	if err != nil {
		return PodResult{}, err
	}
	p := &pod{ns: n, rt: &libcni.RuntimeConf{
		ContainerID: "cid-" + a.Me.Name + "-" + r.Name, NetNS: n.Path(), IfName: "eth0",
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
	if err := p.serve(r.Name); err != nil {
		return PodResult{}, err
	}
	a.mu.Lock()
	a.pods[r.Name] = p
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
	p, ok := a.pods[r.Name]
	delete(a.pods, r.Name)
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
	if out, err := exec.Command("ip", "netns", "del", podNetns(r.Name)).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del: %w: %s", err, out)
	}
	return nil
}

// Probe tries one flow from a pod (see ProbeRequest).
func (a *Agent) Probe(r ProbeRequest) (ProbeResult, error) {
	a.mu.Lock()
	p, ok := a.pods[r.From]
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
	switch r.Proto {
	case "tcp":
		reply, err = netnstest.DialTCPWithin(p.ns, net.JoinHostPort(r.Dst, strconv.Itoa(TCPPort)), d)
	case "udp":
		reply, err = udpProbe(p.ns, net.JoinHostPort(r.Dst, strconv.Itoa(UDPPort)), r.Size, d)
	case "icmp":
		err = netnstest.Ping(p.ns, r.Dst, int(time.Now().UnixNano()&0x7fff), d)
	default:
		return ProbeResult{}, fmt.Errorf("probe: unknown protocol %q", r.Proto)
	}
	if err != nil {
		return ProbeResult{Error: err.Error()}, nil
	}
	return ProbeResult{Reply: strings.TrimSpace(reply)}, nil
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
