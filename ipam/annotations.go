package ipam

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// Pod annotations Calico's CNI plugin honours for IPAM.
const (
	AnnotationIPv4Pools = "cni.projectcalico.org/ipv4pools"
	AnnotationIPv6Pools = "cni.projectcalico.org/ipv6pools"
	AnnotationIPAddrs   = "cni.projectcalico.org/ipAddrs"
)

// PodRequest is what a pod's annotations ask of IPAM.
type PodRequest struct {
	IPv4Pools, IPv6Pools []string     // pool names or CIDRs
	IPAddrs              []netip.Addr // specific addresses
}

// ParsePodAnnotations reads the IPAM annotations; each is a JSON list of
// strings, e.g. ["pool-a","10.0.0.0/16"] or ["10.0.0.7","fd00::7"].
func ParsePodAnnotations(ann map[string]string) (PodRequest, error) {
	var r PodRequest
	list := func(key string) ([]string, error) {
		v, ok := ann[key]
		if !ok {
			return nil, nil
		}
		var out []string
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return nil, fmt.Errorf("annotation %s=%q is not a JSON list of strings: %w", key, v, ErrInvalidArgs)
		}
		return out, nil
	}
	var err error
	if r.IPv4Pools, err = list(AnnotationIPv4Pools); err != nil {
		return r, err
	}
	if r.IPv6Pools, err = list(AnnotationIPv6Pools); err != nil {
		return r, err
	}
	addrs, err := list(AnnotationIPAddrs)
	if err != nil {
		return r, err
	}
	for _, a := range addrs {
		ip, perr := netip.ParseAddr(a)
		if perr != nil {
			return r, fmt.Errorf("annotation %s: %q is not an IP address: %w", AnnotationIPAddrs, a, ErrInvalidArgs)
		}
		r.IPAddrs = append(r.IPAddrs, ip.Unmap())
	}
	return r, nil
}
