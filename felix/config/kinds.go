package config

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var errNoneNonZero = errors.New(`"none" is not allowed: the setting cannot be empty`)

// Kind is how a setting's raw text is parsed (Calico's parameter types).
// Values are bool, int, uint32, time.Duration, string, []string,
// *regexp.Regexp (compared by text), []PortSpec or netip.Addr.
type Kind struct {
	Name  string
	Parse func(string) (any, error)
	zeroV any
}

func (k Kind) zero() any { return k.zeroV }

// PortSpec is one entry of a failsafe port list: "tcp:22" or
// "tcp:10.0.0.0/8:22".
type PortSpec struct {
	Protocol string
	Net      string
	Port     uint16
}

// Regexp is a parsed regular expression that compares by its text.
type Regexp struct{ Text string }

// Compile returns the compiled expression (it parsed when set).
func (r Regexp) Compile() *regexp.Regexp { return regexp.MustCompile(r.Text) }

var (
	KindBool = Kind{Name: "bool", zeroV: false, Parse: func(s string) (any, error) {
		switch strings.ToLower(s) {
		case "true", "1", "yes", "y", "t":
			return true, nil
		case "false", "0", "no", "n", "f":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not a boolean (true or false)", s)
	}}
	KindInt     = intKind(-1<<62, 1<<62)
	KindPort    = intKind(0, 65535)
	KindSeconds = Kind{Name: "seconds", zeroV: time.Duration(0), Parse: durationIn(time.Second)}
	KindMillis  = Kind{Name: "millis", zeroV: time.Duration(0), Parse: durationIn(time.Millisecond)}
	KindString  = Kind{Name: "string", zeroV: "", Parse: func(s string) (any, error) { return s, nil }}
	// KindOpaque is a structured setting Tabby only compares (key=value
	// lists, route table ranges, port ranges...).
	KindOpaque   = Kind{Name: "opaque", zeroV: "", Parse: func(s string) (any, error) { return strings.TrimSpace(s), nil }}
	KindMarkMask = Kind{Name: "mark-bitmask", zeroV: uint32(0), Parse: func(s string) (any, error) {
		n, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a 32-bit mark mask (e.g. 0xffff0000)", s)
		}
		if n == 0 {
			return nil, errors.New("the mark mask must have bits set")
		}
		return uint32(n), nil
	}}
	KindRegexp = Kind{Name: "regexp", zeroV: Regexp{}, Parse: func(s string) (any, error) {
		if _, err := regexp.Compile(s); err != nil {
			return nil, fmt.Errorf("%q is not a regular expression: %w", s, err)
		}
		return Regexp{Text: s}, nil
	}}
	ifaceName     = regexp.MustCompile(`^[a-zA-Z0-9_.\-]{1,15}$`)
	KindIfaceList = Kind{Name: "iface-list", zeroV: []string(nil), Parse: func(s string) (any, error) {
		out := strings.Split(s, ",")
		for _, n := range out {
			if !ifaceName.MatchString(n) {
				return nil, fmt.Errorf("%q is not an interface name or prefix", n)
			}
		}
		return out, nil
	}}
	KindCIDRList = Kind{Name: "cidr-list", zeroV: []string(nil), Parse: func(s string) (any, error) {
		var out []string
		for _, c := range strings.Split(s, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR", c)
			}
			out = append(out, p.Masked().String())
		}
		return out, nil
	}}
	KindIPv4     = ipKind(true)
	KindIPv6     = ipKind(false)
	KindPortList = Kind{Name: "port-list", zeroV: []PortSpec{}, Parse: parsePortList}
	// KindLogLevel is Calico's oneof(TRACE,DEBUG,INFO,WARNING,ERROR,FATAL).
	KindLogLevel = OneOf("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")
)

func intKind(lo, hi int) Kind {
	return Kind{Name: "int", zeroV: 0, Parse: func(s string) (any, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%q is not an integer in [%d, %d]", s, lo, hi)
		}
		return n, nil
	}}
}

// IntRange is an int setting bounded to [lo, hi].
func IntRange(lo, hi int) Kind { return intKind(lo, hi) }

func durationIn(unit time.Duration) func(string) (any, error) {
	return func(s string) (any, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("%q is not a non-negative number of %s", s, map[time.Duration]string{time.Second: "seconds", time.Millisecond: "milliseconds"}[unit])
		}
		return time.Duration(f * float64(unit)), nil
	}
}

// OneOf is Calico's oneof(...): a case-insensitive choice, given back in
// the spelling listed.
func OneOf(choices ...string) Kind {
	return Kind{Name: "oneof(" + strings.Join(choices, ",") + ")", zeroV: "", Parse: func(s string) (any, error) {
		for _, c := range choices {
			if strings.EqualFold(c, s) {
				return c, nil
			}
		}
		return nil, fmt.Errorf("%q is not one of %s", s, strings.Join(choices, ", "))
	}}
}

func ipKind(v4 bool) Kind {
	return Kind{Name: map[bool]string{true: "ipv4", false: "ipv6"}[v4], zeroV: netip.Addr{}, Parse: func(s string) (any, error) {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Is4() != v4 {
			return nil, fmt.Errorf("%q is not an IPv%s address", s, map[bool]string{true: "4", false: "6"}[v4])
		}
		return a, nil
	}}
}

// parsePortList reads Calico's "tcp:22,udp:68" list, an entry optionally
// limited to a peer network: "tcp:10.0.0.0/8:22" ("[fd00::/8]" for IPv6).
func parsePortList(s string) (any, error) {
	out := []PortSpec{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		colon := strings.LastIndex(item, ":")
		first := strings.Index(item, ":")
		if colon < 0 {
			return nil, fmt.Errorf("%q is not <tcp|udp|sctp>:[<net>:]<port>", item)
		}
		proto := strings.ToLower(item[:first])
		var netStr string
		if first != colon {
			netStr = strings.Trim(item[first+1:colon], "[]")
			if _, err := netip.ParsePrefix(netStr); err != nil {
				return nil, fmt.Errorf("%q: %q is not a CIDR", item, netStr)
			}
		}
		n, err := strconv.ParseUint(item[colon+1:], 10, 16)
		if err != nil || n == 0 || (proto != "tcp" && proto != "udp" && proto != "sctp") {
			return nil, fmt.Errorf("%q is not <tcp|udp|sctp>:[<net>:]<port>", item)
		}
		out = append(out, PortSpec{Protocol: proto, Net: netStr, Port: uint16(n)})
	}
	return out, nil
}

// MarkBits returns the lowest n bits set in mask, lowest first (Calico
// allocates felix's marks from the mask in this order).
func MarkBits(mask uint32, n int) []uint32 {
	var out []uint32
	for mask != 0 && len(out) < n {
		b := uint32(1) << bits.TrailingZeros32(mask)
		out = append(out, b)
		mask &^= b
	}
	return out
}
