package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// ProbeResult is one probe: a connection from one pod to another on one
// port.
type ProbeResult struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Port    string `json:"port"`
	Allowed bool   `json:"allowed"`
	// Detail is why a probe counts as denied (timeout, refused, ...).
	Detail string `json:"detail,omitempty"`
}

// Verdict is "allow" or "deny".
func (r ProbeResult) Verdict() string {
	if r.Allowed {
		return "allow"
	}
	return "deny"
}

// String is the probe's stable line: "x/a -> y/b tcp/80 allow".
func (r ProbeResult) String() string {
	return fmt.Sprintf("%s -> %s %s %s", r.From, r.To, r.Port, r.Verdict())
}

// sortPorts sorts ports by protocol, then number (tcp/80, tcp/81, udp/80).
func sortPorts(ports []Port) {
	slices.SortFunc(ports, func(a, b Port) int {
		if c := strings.Compare(strings.ToLower(a.Protocol), strings.ToLower(b.Protocol)); c != 0 {
			return c
		}
		return a.Port - b.Port
	})
}

// probeJobs are the probes of one round: from every pod to every other
// pod on each port the target serves; with only (non-empty), on those of
// them that are in only. A pod is never probed on a port it does not
// serve (that would be a refusal, not a policy's verdict).
func probeJobs(pods []PodState, only []Port) []ProbeResult {
	want := map[string]bool{}
	for _, pt := range only {
		want[pt.String()] = true
	}
	var jobs []ProbeResult
	for _, from := range pods {
		for _, to := range pods {
			if from.Key() == to.Key() {
				continue
			}
			ports := slices.Clone(to.Ports)
			sortPorts(ports)
			for _, pt := range ports {
				if len(only) == 0 || want[pt.String()] {
					jobs = append(jobs, ProbeResult{From: from.Key(), To: to.Key(), Port: pt.String()})
				}
			}
		}
	}
	return jobs
}

// Probe connects from every pod to every other pod on each port the
// target serves (see probeJobs; ports, when given, narrow them), all at
// once, each within timeout. A probe is allowed when the target pod's
// server answered with its id; anything else (no answer, refused, another
// answer) is denied. The results are sorted.
func (l *Lab) Probe(ctx context.Context, ports []Port, timeout time.Duration) ([]ProbeResult, error) {
	jobs := probeJobs(l.State.Pods, ports)
	if len(jobs) == 0 {
		return nil, fmt.Errorf("no pod serves any of the ports %v", ports)
	}
	pods := map[string]PodState{}
	nss := map[string]ns.NetNS{}
	for _, p := range l.State.Pods {
		pods[p.Key()] = p
		n, err := ns.GetNS(netnsPath(p.Netns))
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Key(), err)
		}
		defer n.Close()
		nss[p.Key()] = n
	}
	err := parallel(len(jobs), func(i int) error {
		j := &jobs[i]
		to := pods[j.To]
		proto, port, _ := strings.Cut(j.Port, "/")
		addr := net.JoinHostPort(to.IP, port)
		var detail string
		if err := nss[j.From].Do(func(ns.NetNS) error {
			var src func() int
			if proto == "udp" {
				src = func() int { return l.udpPorts.take(j.From) }
			}
			detail = probeOne(ctx, proto, addr, to.Key(), timeout, src)
			return nil
		}); err != nil {
			return err
		}
		j.Allowed, j.Detail = detail == "", detail
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(jobs, func(a, b ProbeResult) int {
		if c := strings.Compare(a.From, b.From); c != 0 {
			return c
		}
		return strings.Compare(a.To, b.To)
	})
	return jobs, nil
}

// probeOne returns "" when the server at addr answered with want, else
// what happened. It must run inside the source pod's namespace (the
// socket is made there). A UDP probe's source port comes from srcPort (a
// port in use is skipped), so that it is never an earlier flow.
func probeOne(ctx context.Context, proto, addr, want string, timeout time.Duration, srcPort func() int) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var d net.Dialer
	if proto == "tcp" {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return shortErr(err)
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return shortErr(err)
		}
		if got := strings.TrimSpace(line); got != want {
			return "answered by " + strconv.Quote(got)
		}
		return ""
	}
	var c net.Conn
	var err error
	for try := 0; try < 8; try++ {
		if srcPort != nil {
			d.LocalAddr = &net.UDPAddr{Port: srcPort()}
		}
		if c, err = d.DialContext(ctx, "udp", addr); err == nil || srcPort == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return shortErr(err)
	}
	defer c.Close()
	// Two tries within the timeout: a datagram (or its answer) may be
	// lost while neighbours are resolved.
	buf := make([]byte, 512)
	var last error
	for try := 0; try < 2; try++ {
		_ = c.SetDeadline(time.Now().Add(timeout / 2))
		if _, err := c.Write([]byte("probe\n")); err != nil {
			last = err
			continue
		}
		n, err := c.Read(buf)
		if err != nil {
			last = err
			continue
		}
		if got := strings.TrimSpace(string(buf[:n])); got != want {
			return "answered by " + strconv.Quote(got)
		}
		return ""
	}
	return shortErr(last)
}

func shortErr(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "timeout"), strings.Contains(s, "deadline exceeded"):
		return "timeout"
	case strings.Contains(s, "refused"):
		return "refused"
	}
	return s
}

// Matrix renders results as the table the upstream NetworkPolicy e2e
// tests print: one block per port, rows the sources, columns the
// targets, "." allowed, "X" denied.
func Matrix(results []ProbeResult) string {
	var ports, pods []string
	cell := map[string]string{}
	for _, r := range results {
		if !slices.Contains(ports, r.Port) {
			ports = append(ports, r.Port)
		}
		for _, p := range []string{r.From, r.To} {
			if !slices.Contains(pods, p) {
				pods = append(pods, p)
			}
		}
		v := "X"
		if r.Allowed {
			v = "."
		}
		cell[r.Port+" "+r.From+" "+r.To] = v
	}
	slices.Sort(ports)
	slices.Sort(pods)
	var b strings.Builder
	for _, port := range ports {
		fmt.Fprintf(&b, "%s\n%-6s", port, "")
		for _, to := range pods {
			fmt.Fprintf(&b, " %-4s", to)
		}
		b.WriteString("\n")
		for _, from := range pods {
			fmt.Fprintf(&b, "%-6s", from)
			for _, to := range pods {
				v, ok := cell[port+" "+from+" "+to]
				if !ok {
					v = "-"
				}
				fmt.Fprintf(&b, " %-4s", v)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
