package numorstring

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Protocol names Calico accepts (matched case-insensitively).
const (
	ProtocolTCP     = "TCP"
	ProtocolUDP     = "UDP"
	ProtocolICMP    = "ICMP"
	ProtocolICMPv6  = "ICMPv6"
	ProtocolSCTP    = "SCTP"
	ProtocolUDPLite = "UDPLite"
)

var protocolNumbers = map[string]uint8{
	"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "sctp": 132, "udplite": 136,
}

// Protocol is an IP protocol, written as a name (TCP, UDP, ICMP, ICMPv6,
// SCTP, UDPLite) or a number 1-255.
// +kubebuilder:validation:XIntOrString
// +kubebuilder:validation:Pattern=`^.*`
type Protocol struct {
	// Num is set when the protocol was written as a number.
	Num uint8 `json:"-"`
	// Name is set when the protocol was written as a name.
	Name string `json:"-"`
}

// canonicalNames maps each name, lower-cased, to its spelling in Calico's
// API.
var canonicalNames = map[string]string{
	"tcp": ProtocolTCP, "udp": ProtocolUDP, "icmp": ProtocolICMP,
	"icmpv6": ProtocolICMPv6, "sctp": ProtocolSCTP, "udplite": ProtocolUDPLite,
}

// ProtocolFromString returns a named protocol. A known name is spelled as
// Calico's API spells it ("tcp" becomes "TCP"), as Calico's own
// ProtocolFromString does; an unknown one is kept as given, for
// validation to report.
func ProtocolFromString(s string) Protocol {
	if c, ok := canonicalNames[strings.ToLower(s)]; ok {
		return Protocol{Name: c}
	}
	return Protocol{Name: s}
}

// ProtocolFromInt returns a numbered protocol.
func ProtocolFromInt(n uint8) Protocol { return Protocol{Num: n} }

// Validate reports whether the protocol is one Calico knows.
func (p Protocol) Validate() error {
	if p.Name != "" {
		if _, ok := protocolNumbers[strings.ToLower(p.Name)]; !ok {
			return fmt.Errorf("%q is not a protocol: use TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a number 1-255", p.Name)
		}
		return nil
	}
	if p.Num == 0 {
		return fmt.Errorf("protocol number must be 1-255")
	}
	return nil
}

// ValidateCanonical is Validate as Calico's validator applies it to a
// resource being written: a name must be spelled exactly as Calico's API
// spells it (TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite); "tcp" is refused,
// with Calico's reason ("protocol name invalid"). Stored data is read
// with the lenient Validate.
func (p Protocol) ValidateCanonical() error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Name != "" && canonicalNames[strings.ToLower(p.Name)] != p.Name {
		return fmt.Errorf("protocol name invalid: %q must be spelled %q", p.Name, canonicalNames[strings.ToLower(p.Name)])
	}
	return nil
}

// Number returns the IP protocol number (0 when the name is unknown).
func (p Protocol) Number() uint8 {
	if p.Name != "" {
		return protocolNumbers[strings.ToLower(p.Name)]
	}
	return p.Num
}

// SupportsPorts reports whether rules on this protocol may match ports.
func (p Protocol) SupportsPorts() bool {
	switch p.Number() {
	case 6, 17, 132, 136:
		return true
	}
	return false
}

// IsICMP reports whether this is ICMP (v4) and IsICMPv6 whether ICMPv6.
func (p Protocol) IsICMP() bool   { return p.Number() == 1 }
func (p Protocol) IsICMPv6() bool { return p.Number() == 58 }

// String renders the protocol as written.
func (p Protocol) String() string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(int(p.Num))
}

// MarshalJSON writes the name as a string and a number as a number.
func (p Protocol) MarshalJSON() ([]byte, error) {
	if p.Name != "" {
		return json.Marshal(p.Name)
	}
	return json.Marshal(p.Num)
}

// UnmarshalJSON accepts a name or a number 0-255 (range checked by Validate).
func (p *Protocol) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if n, err := strconv.ParseUint(s, 10, 8); err == nil {
			*p = Protocol{Num: uint8(n)}
			return nil
		}
		*p = Protocol{Name: s}
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("protocol must be a name or a number, got %s", b)
	}
	if n < 1 || n > 255 {
		return fmt.Errorf("protocol number %d is outside 1-255", n)
	}
	*p = Protocol{Num: uint8(n)}
	return nil
}
