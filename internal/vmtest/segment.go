package vmtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Underlay addressing (as internal/multinode's): subnet s is
// 172.30.<s+1>.0/24 with the segment's router at .1 and node i at .<10+i>.

// RouterAddr is the segment namespace's address on subnet s.
func RouterAddr(s int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 30, byte(s + 1), 1}), 24)
}

// NodeAddr is node i's underlay address on subnet s.
func NodeAddr(s, i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 30, byte(s + 1), byte(10 + i)}), 24)
}

// NodeMAC is node i's NIC address.
func NodeMAC(i int) string { return fmt.Sprintf("52:54:00:7a:00:%02x", i) }

// NewPrefix returns a short unique name prefix: "tvm" and 6 hex digits.
func NewPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "tvm" + hex.EncodeToString(b[:])
}

// Segment is the VMs' private L2 network: a namespace of its own with a
// bridge per subnet, routing between them.
type Segment struct {
	Netns string // the namespace's name (/run/netns/<Netns>)
	ns    ns.NetNS
	mu    sync.Mutex
	lns   []net.Listener
}

// Remove closes the segment and deletes its namespace (with the bridges
// and taps in it).
func (s *Segment) Remove() error {
	return errors.Join(s.Close(), ipCmd("netns", "del", s.Netns))
}

// NewSegment creates the namespace <prefix>-seg with bridges br0..br<subnets-1>.
func NewSegment(prefix string, subnets int) (*Segment, error) {
	s := &Segment{Netns: prefix + "-seg"}
	if err := ipCmd("netns", "add", s.Netns); err != nil {
		return nil, err
	}
	var err error
	if s.ns, err = ns.GetNS(filepath.Join("/run/netns", s.Netns)); err != nil {
		_ = s.Remove()
		return nil, err
	}
	steps := [][]string{{"link", "set", "lo", "up"}}
	for i := 0; i < subnets; i++ {
		br := fmt.Sprintf("br%d", i)
		steps = append(steps, []string{"link", "add", br, "type", "bridge"},
			[]string{"addr", "add", RouterAddr(i).String(), "dev", br}, []string{"link", "set", br, "up"})
	}
	for _, st := range steps {
		if err := ipCmd(append([]string{"-n", s.Netns}, st...)...); err != nil {
			_ = s.Remove()
			return nil, err
		}
	}
	if err := s.Do(func() error { return writeSysctl("net/ipv4/ip_forward", "1") }); err != nil {
		_ = s.Remove()
		return nil, err
	}
	return s, nil
}

// AddTap creates tap device name on bridge br<subnet>, for one VM's NIC.
func (s *Segment) AddTap(name string, subnet int) error {
	for _, st := range [][]string{
		{"tuntap", "add", name, "mode", "tap"},
		{"link", "set", name, "master", fmt.Sprintf("br%d", subnet)},
		{"link", "set", name, "up"},
	} {
		if err := ipCmd(append([]string{"-n", s.Netns}, st...)...); err != nil {
			return err
		}
	}
	return nil
}

// Do runs f on a thread inside the segment's namespace.
func (s *Segment) Do(f func() error) error {
	var err error
	if derr := s.ns.Do(func(ns.NetNS) error { err = f(); return nil }); derr != nil {
		return derr
	}
	return err
}

// DialContext connects from inside the segment (the socket belongs to it),
// for the harness's calls to the guests.
func (s *Segment) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := s.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Forward listens on listen inside the segment and copies each
// connection to the unix socket target (the datastore), until Close.
func (s *Segment) Forward(listen, target string) error {
	var ln net.Listener
	if err := s.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", listen)
		return err
	}); err != nil {
		return fmt.Errorf("listening on %s in %s: %w", listen, s.Netns, err)
	}
	s.mu.Lock()
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go splice(c, target)
		}
	}()
	return nil
}

func splice(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("unix", target)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}

// Close stops the forwarders and releases this process's handle; the
// namespace stays (Remove deletes it).
func (s *Segment) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.lns {
		_ = ln.Close()
	}
	s.lns = nil
	if s.ns == nil {
		return nil
	}
	err := s.ns.Close()
	s.ns = nil
	return err
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Capture is a tcpdump running on one of the segment's interfaces.
type Capture struct {
	cmd  *exec.Cmd
	out  *strings.Builder
	done chan error
}

// Capture starts tcpdump on iface (e.g. br0) inside the segment with a
// pcap filter; Stop returns one line per packet seen. The capture is
// where the VMs' packets really travel, outside every guest.
func (s *Segment) Capture(iface, filter string) (*Capture, error) {
	c := &Capture{out: &strings.Builder{}, done: make(chan error, 1)}
	c.cmd = exec.Command("ip", "netns", "exec", s.Netns, "tcpdump", "-l", "-nn", "-i", iface, "-s", "128", filter)
	c.cmd.Stdout = c.out
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("tcpdump in %s: %w", s.Netns, err)
	}
	// tcpdump says "listening on" once it captures.
	buf := make([]byte, 512)
	var seen strings.Builder
	for !strings.Contains(seen.String(), "listening on") {
		n, err := stderr.Read(buf)
		if err != nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
			return nil, fmt.Errorf("tcpdump on %s: %s", iface, seen.String())
		}
		seen.Write(buf[:n])
	}
	go func() { _, _ = io.Copy(io.Discard, stderr); c.done <- c.cmd.Wait() }()
	return c, nil
}

// Stop ends the capture and returns the packets' lines.
func (c *Capture) Stop() []string {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	<-c.done
	var lines []string
	for _, l := range strings.Split(c.out.String(), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// OpenSegment opens an existing segment by its namespace's name (a lab's,
// from another process than the one that made it).
func OpenSegment(name string) (*Segment, error) {
	n, err := ns.GetNS(filepath.Join("/run/netns", name))
	if err != nil {
		return nil, fmt.Errorf("the VMs' segment %s: %w", name, err)
	}
	return &Segment{Netns: name, ns: n}, nil
}
