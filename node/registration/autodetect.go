package registration

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// ErrNoAddress is returned when an autodetection method matches nothing.
var ErrNoAddress = errors.New("no address matched")

// DefaultExcludedInterfaces are the interfaces first-found (and the
// methods built on it) never pick: container, tunnel and virtual devices,
// as calico-node's defaults.
var DefaultExcludedInterfaces = []string{
	"^docker.*", "^cbr.*", "^dummy.*", "^virbr.*", "^lxcbr.*", "^veth.*", "^lo$",
	"^cali.*", "^tunl.*", "^flannel.*", "^kube-ipvs.*", "^cni.*", "^vxlan.calico.*",
	"^vxlan-v6.calico.*", "^wireguard.cali.*", "^wg-v6.cali.*", "^nodelocaldns.*", "^podman.*",
}

// Interface is one of the node's interfaces with its addresses (with
// their prefix lengths), in the kernel's order.
type Interface struct {
	Name  string
	Addrs []netip.Prefix
}

// Env is what the methods look at.
type Env struct {
	Interfaces []Interface
	// RouteSource returns the source address the kernel uses towards dst
	// (for can-reach).
	RouteSource func(dst netip.Addr) (netip.Addr, error)
	// KubernetesInternalIPs are the InternalIP addresses of the
	// Kubernetes node (for kubernetes-internal-ip).
	KubernetesInternalIPs []netip.Addr
}

// Autodetect chooses the node's address of one IP version (4 or 6) by a
// Calico autodetection method: first-found (also ""), interface=<regex>
// [,<regex>...], skip-interface=<regex>[,...], can-reach=<ip>,
// cidr=<cidr>[,<cidr>...] or kubernetes-internal-ip. An unknown method or
// bad argument is refused; a method matching nothing fails with
// ErrNoAddress, naming the method.
func Autodetect(method string, version int, env Env) (netip.Prefix, error) {
	name, arg, _ := strings.Cut(method, "=")
	name = strings.TrimSpace(name)
	fail := func() (netip.Prefix, error) {
		return netip.Prefix{}, fmt.Errorf("IPv%d autodetection method %q: %w on the node's interfaces", version, method, ErrNoAddress)
	}
	bad := func(err error) (netip.Prefix, error) {
		return netip.Prefix{}, fmt.Errorf("IPv%d autodetection method %q: %w", version, method, err)
	}
	switch name {
	case "", "first-found":
		if p, ok := first(env.Interfaces, version, nil, compileAll(DefaultExcludedInterfaces), nil); ok {
			return p, nil
		}
		return fail()
	case "interface":
		inc, err := compileList(arg)
		if err != nil {
			return bad(err)
		}
		if p, ok := first(env.Interfaces, version, inc, nil, nil); ok {
			return p, nil
		}
		return fail()
	case "skip-interface":
		exc, err := compileList(arg)
		if err != nil {
			return bad(err)
		}
		if p, ok := first(env.Interfaces, version, nil, append(exc, compileAll(DefaultExcludedInterfaces)...), nil); ok {
			return p, nil
		}
		return fail()
	case "cidr":
		var cidrs []netip.Prefix
		for _, s := range strings.Split(arg, ",") {
			c, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return bad(fmt.Errorf("bad CIDR %q: %w", s, err))
			}
			cidrs = append(cidrs, c)
		}
		in := func(a netip.Addr) bool {
			for _, c := range cidrs {
				if c.Contains(a) {
					return true
				}
			}
			return false
		}
		if p, ok := first(env.Interfaces, version, nil, nil, in); ok {
			return p, nil
		}
		return fail()
	case "can-reach":
		dst, err := netip.ParseAddr(strings.TrimSpace(arg))
		if err != nil {
			return bad(fmt.Errorf("destination %q must be an IP address: %w", arg, err))
		}
		if (version == 4) != dst.Is4() {
			return bad(fmt.Errorf("destination %s is not IPv%d", dst, version))
		}
		if env.RouteSource == nil {
			return bad(errors.New("no route lookup available"))
		}
		src, err := env.RouteSource(dst)
		if err != nil {
			return bad(fmt.Errorf("%w: no route to %s: %v", ErrNoAddress, dst, err))
		}
		if p, ok := first(env.Interfaces, version, nil, nil, func(a netip.Addr) bool { return a == src }); ok {
			return p, nil
		}
		return fail()
	case "kubernetes-internal-ip":
		for _, ip := range env.KubernetesInternalIPs {
			if p, ok := first(env.Interfaces, version, nil, nil, func(a netip.Addr) bool { return a == ip }); ok {
				return p, nil
			}
		}
		return fail()
	}
	return bad(errors.New("unknown method (want first-found, interface=, skip-interface=, can-reach=, cidr= or kubernetes-internal-ip)"))
}

// first returns the first usable address of the version on an interface
// matching include (all when nil) and no exclude, accepted by ok (all
// when nil).
func first(ifaces []Interface, version int, include, exclude []*regexp.Regexp, ok func(netip.Addr) bool) (netip.Prefix, bool) {
	for _, ifc := range ifaces {
		if include != nil && !anyMatch(include, ifc.Name) || anyMatch(exclude, ifc.Name) {
			continue
		}
		for _, p := range ifc.Addrs {
			a := p.Addr()
			if (version == 4) != a.Is4() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() {
				continue
			}
			if ok == nil || ok(a) {
				return p, true
			}
		}
	}
	return netip.Prefix{}, false
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func compileList(arg string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, s := range strings.Split(arg, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("bad interface regex %q: %w", s, err)
		}
		out = append(out, re)
	}
	if len(out) == 0 {
		return nil, errors.New("needs at least one interface regex")
	}
	return out, nil
}

func compileAll(res []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(res))
	for i, s := range res {
		out[i] = regexp.MustCompile(s)
	}
	return out
}
