package numorstring

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Port is a single port, an inclusive range of ports, or a named port that
// is resolved per endpoint. YAML forms: 80, "80", "8080:8090", "http".
// +kubebuilder:validation:XIntOrString
// +kubebuilder:validation:Pattern=`^.*`
type Port struct {
	MinPort  uint16 `json:"minPort,omitempty"`
	MaxPort  uint16 `json:"maxPort,omitempty"`
	PortName string `json:"portName,omitempty"`
}

// SinglePort returns a Port for one port number.
func SinglePort(p uint16) Port { return Port{MinPort: p, MaxPort: p} }

// PortRange returns a Port for an inclusive range. It fails when min > max.
func PortRange(min, max uint16) (Port, error) {
	if min > max {
		return Port{}, fmt.Errorf("port range %d:%d has its minimum above its maximum", min, max)
	}
	return Port{MinPort: min, MaxPort: max}, nil
}

// NamedPort returns a Port that refers to a named port.
func NamedPort(name string) Port { return Port{PortName: name} }

// PortFromString parses "80", "8080:8090" or a port name.
func PortFromString(s string) (Port, error) {
	if s == "" {
		return Port{}, fmt.Errorf("empty port")
	}
	if lo, hi, ok := strings.Cut(s, ":"); ok {
		min, err := parsePortNum(lo)
		if err != nil {
			return Port{}, fmt.Errorf("port range %q: %w", s, err)
		}
		max, err := parsePortNum(hi)
		if err != nil {
			return Port{}, fmt.Errorf("port range %q: %w", s, err)
		}
		return PortRange(min, max)
	}
	if s[0] >= '0' && s[0] <= '9' {
		n, err := parsePortNum(s)
		if err != nil {
			return Port{}, err
		}
		return SinglePort(n), nil
	}
	return NamedPort(s), nil
}

func parsePortNum(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	if n > 65535 {
		return 0, fmt.Errorf("port %d is above 65535", n)
	}
	return uint16(n), nil
}

// IsNamed reports whether p refers to a named port.
func (p Port) IsNamed() bool { return p.PortName != "" }

// IsRange reports whether p is a range of more than one port.
func (p Port) IsRange() bool { return p.PortName == "" && p.MinPort != p.MaxPort }

// String renders p as it is written in YAML: "80", "8080:8090" or the name.
func (p Port) String() string {
	switch {
	case p.PortName != "":
		return p.PortName
	case p.MinPort == p.MaxPort:
		return strconv.Itoa(int(p.MinPort))
	default:
		return fmt.Sprintf("%d:%d", p.MinPort, p.MaxPort)
	}
}

// MarshalJSON writes a single port as a number and anything else as a string.
func (p Port) MarshalJSON() ([]byte, error) {
	if p.PortName == "" && p.MinPort == p.MaxPort {
		return json.Marshal(p.MinPort)
	}
	return json.Marshal(p.String())
}

// UnmarshalJSON accepts a number or any string form of PortFromString.
func (p *Port) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := PortFromString(s)
		if err != nil {
			return err
		}
		*p = v
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("port must be a number or a string, got %s", b)
	}
	if n < 0 || n > 65535 {
		return fmt.Errorf("port %d is outside 0-65535", n)
	}
	*p = SinglePort(uint16(n))
	return nil
}
