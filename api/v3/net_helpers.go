package v3

// Helpers shared by the network, BGP and IPAM kinds (IPPool, IPReservation,
// IPAMConfiguration, BGPConfiguration, BGPPeer, BGPFilter, Node, IPAMBlock,
// BlockAffinity, IPAMHandle). Unexported names start with "net" so they do
// not collide with helpers of other kinds in this package.

import (
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// netParseIPOrCIDR parses a bare IP or a CIDR whose host bits may be set
// (Calico's "cidr" rule, as used for node addresses). It returns the address,
// its network and the IP version (4 or 6).
func netParseIPOrCIDR(s string) (net.IP, *net.IPNet, int, error) {
	if strings.Contains(s, "/") {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("%q is not a valid CIDR", s)
		}
		if ip4 := ip.To4(); ip4 != nil {
			return ip4, n, 4, nil
		}
		return ip, n, 6, nil
	}
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, nil, 0, fmt.Errorf("%q is not a valid IP address or CIDR", s)
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4, &net.IPNet{IP: ip4, Mask: net.CIDRMask(32, 32)}, 4, nil
	}
	return ip, &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)}, 6, nil
}

// netStrictNet checks Calico's "net" rule: s is a bare IP (taken as /32 or
// /128) or a CIDR with no host bits set. It adds an error at p and returns
// nil when s is not. wantVersion 4 or 6 also requires that IP version.
func netStrictNet(p Path, s string, wantVersion int, errs *ErrorList) *net.IPNet {
	ip, n, v, err := netParseIPOrCIDR(s)
	if err != nil {
		errs.Add(p, err.Error())
		return nil
	}
	if wantVersion != 0 && v != wantVersion {
		errs.Addf(p, "%q is an IPv%d CIDR; this field takes IPv%d", s, v, wantVersion)
		return nil
	}
	if !ip.Equal(n.IP) {
		errs.Addf(p, "%q has host bits set (did you mean %s?)", s, n.String())
		return nil
	}
	return n
}

// netIPVersion returns 4 or 6 for an IP address, 0 when s is not one.
func netIPVersion(s string) int {
	ip := net.ParseIP(s)
	switch {
	case ip == nil:
		return 0
	case ip.To4() != nil:
		return 4
	default:
		return 6
	}
}

// netCheckIP adds an error unless s is an IP address of the given version
// (0 for either).
func netCheckIP(p Path, s string, version int, errs *ErrorList) {
	v := netIPVersion(s)
	switch {
	case v == 0:
		errs.Addf(p, "%q is not a valid IP address", s)
	case version != 0 && v != version:
		errs.Addf(p, "%q is not an IPv%d address", s, version)
	}
}

// netCheckMAC adds an error unless s is a MAC address.
func netCheckMAC(p Path, s string, errs *ErrorList) {
	if _, err := net.ParseMAC(s); err != nil {
		errs.Addf(p, "%q is not a valid MAC address", s)
	}
}

// netCheckResourceName adds an error unless s is a valid resource name
// (Calico's "name" rule: a lower-case DNS subdomain).
func netCheckResourceName(p Path, s string, errs *ErrorList) {
	for _, msg := range k8svalidation.IsDNS1123Subdomain(s) {
		errs.Addf(p, "%q is not a valid name: %s", s, msg)
	}
}

// netCheckDuration rejects negative durations.
func netCheckDuration(p Path, d *metav1.Duration, errs *ErrorList) {
	if d != nil && d.Duration < 0 {
		errs.Addf(p, "%s is negative; use a duration of 0s or more", d.Duration)
	}
}

// netCheckRange adds an error unless min <= v <= max.
func netCheckRange(p Path, v, min, max int64, errs *ErrorList) {
	if v < min || v > max {
		errs.Addf(p, "%d is outside %d-%d", v, min, max)
	}
}

// netCheckCommunity validates a BGP community value: "aa:nn" (standard,
// 16-bit parts) or "aa:nn:mm" (large, 32-bit parts).
func netCheckCommunity(s string) error {
	parts := strings.Split(s, ":")
	bits := 0
	switch len(parts) {
	case 2:
		bits = 16
	case 3:
		bits = 32
	default:
		return fmt.Errorf("%q is not a BGP community: use aa:nn (standard) or aa:nn:mm (large)", s)
	}
	for _, part := range parts {
		if part == "" || strings.TrimLeft(part, "0123456789") != "" {
			return fmt.Errorf("%q is not a BGP community: use aa:nn (standard) or aa:nn:mm (large) with decimal numbers", s)
		}
		if _, err := strconv.ParseUint(part, 10, bits); err != nil {
			kind := "standard community aa:nn"
			if bits == 32 {
				kind = "large community aa:nn:mm"
			}
			return fmt.Errorf("%q is not a BGP community: each part of a %s must fit in %d bits", s, kind, bits)
		}
	}
	return nil
}

// netCheckIfaceName validates an interface name or glob as Calico's BGP
// filter and ignoredInterfaces rules do: 1-15 of [a-zA-Z0-9_.*-].
func netCheckIfaceName(s string) bool {
	if len(s) == 0 || len(s) > 15 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_' || c == '.' || c == '*' || c == '-':
		default:
			return false
		}
	}
	return true
}

// netCheckWireguardKey validates a base64-encoded 32-byte WireGuard key.
func netCheckWireguardKey(p Path, s string, errs *ErrorList) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		errs.Addf(p, "%q is not a WireGuard public key (base64 of 32 bytes)", s)
	}
}

// netCheckBGPPassword checks a BGP password's secret reference.
func netCheckBGPPassword(p Path, pw *BGPPassword, errs *ErrorList) {
	if pw == nil || pw.SecretKeyRef == nil {
		return
	}
	ref := p.Child("secretKeyRef")
	if pw.SecretKeyRef.Name == "" {
		errs.Add(ref.Child("name"), "is required: name the Secret that holds the password")
	} else {
		netCheckResourceName(ref.Child("name"), pw.SecretKeyRef.Name, errs)
	}
	if pw.SecretKeyRef.Key == "" {
		errs.Add(ref.Child("key"), "is required: name the key within the Secret")
	} else {
		for _, msg := range k8svalidation.IsConfigMapKey(pw.SecretKeyRef.Key) {
			errs.Addf(ref.Child("key"), "%q is not a valid secret key: %s", pw.SecretKeyRef.Key, msg)
		}
	}
}

// netCheckUnique adds an error for each repeated value in a set-like list.
func netCheckUnique[T comparable](p Path, vals []T, errs *ErrorList) {
	seen := make(map[T]bool, len(vals))
	for i, v := range vals {
		if seen[v] {
			errs.Addf(p.Index(i), "%v is listed more than once", v)
		}
		seen[v] = true
	}
}

// CIDRsOverlap reports whether two CIDRs share any address. Bare IPs are
// taken as /32 or /128; CIDRs of different IP versions never overlap.
func CIDRsOverlap(a, b string) (bool, error) {
	_, na, va, err := netParseIPOrCIDR(a)
	if err != nil {
		return false, err
	}
	_, nb, vb, err := netParseIPOrCIDR(b)
	if err != nil {
		return false, err
	}
	if va != vb {
		return false, nil
	}
	return netOverlap(na, nb), nil
}

// netOverlap reports whether two networks of the same IP version overlap:
// they do exactly when one contains the other's base address.
func netOverlap(a, b *net.IPNet) bool {
	ma := a.IP.Mask(a.Mask)
	mb := b.IP.Mask(b.Mask)
	return a.Contains(mb) || b.Contains(ma)
}

// PoolsOverlap reports whether two IP pools' CIDRs overlap. A pool whose
// CIDR does not parse overlaps nothing (validation reports it separately).
// Checking a new pool against the existing ones needs the datastore, so it
// happens there; this is the pure part of that check.
func PoolsOverlap(a, b *IPPool) bool {
	ok, err := CIDRsOverlap(a.Spec.CIDR, b.Spec.CIDR)
	return err == nil && ok
}
