package v3

import (
	"errors"
	"fmt"
	"net"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/tabbynet/tabby/api/selector"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// validateMeta checks the object metadata every kind shares: a name that
// follows Kubernetes naming rules, a namespace exactly when the kind is
// namespaced, and well-formed labels.
func validateMeta(m *metav1.ObjectMeta, namespaced bool) ErrorList {
	var errs ErrorList
	p := Path("metadata")
	if m.Name == "" {
		errs.Add(p.Child("name"), "is required")
	} else {
		for _, msg := range k8svalidation.IsDNS1123Subdomain(m.Name) {
			errs.Addf(p.Child("name"), "%q is not a valid name: %s", m.Name, msg)
		}
	}
	if namespaced && m.Namespace != "" {
		for _, msg := range k8svalidation.IsDNS1123Label(m.Namespace) {
			errs.Addf(p.Child("namespace"), "%q is not a valid namespace: %s", m.Namespace, msg)
		}
	}
	if !namespaced && m.Namespace != "" {
		errs.Addf(p.Child("namespace"), "must be empty: this kind is cluster-scoped (got %q)", m.Namespace)
	}
	errs.Extend(validateLabels(p.Child("labels"), m.Labels))
	return errs
}

// validateLabels checks label keys and values against Kubernetes rules.
func validateLabels(p Path, labels map[string]string) ErrorList {
	var errs ErrorList
	for k, v := range labels {
		for _, msg := range k8svalidation.IsQualifiedName(k) {
			errs.Addf(p.Key(k), "invalid label key: %s", msg)
		}
		for _, msg := range k8svalidation.IsValidLabelValue(v) {
			errs.Addf(p.Key(k), "invalid label value %q: %s", v, msg)
		}
	}
	return errs
}

// validateSelector checks that s parses as a Calico selector (empty, or
// only spaces and tabs, is allowed and means all(); as in Calico, other
// whitespace such as a newline is not).
func validateSelector(p Path, s string) ErrorList {
	if _, err := selector.Parse(s); err != nil {
		var pe *selector.ParseError
		if errors.As(err, &pe) {
			return ErrorList{{Path: p, Msg: fmt.Sprintf("invalid selector %q: at position %d: %s", s, pe.Pos, pe.Msg)}}
		}
		return ErrorList{{Path: p, Msg: fmt.Sprintf("invalid selector %q: %v", s, err)}}
	}
	return nil
}

// parseCIDR parses a CIDR, also accepting a bare IP as a /32 or /128 the way
// Calico does for nets fields. It returns the IP version (4 or 6).
func parseCIDR(s string) (*net.IPNet, int, error) {
	if !strings.Contains(s, "/") {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, 0, fmt.Errorf("%q is not a valid IP address or CIDR", s)
		}
		if ip4 := ip.To4(); ip4 != nil {
			return &net.IPNet{IP: ip4, Mask: net.CIDRMask(32, 32)}, 4, nil
		}
		return &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)}, 6, nil
	}
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		return nil, 0, fmt.Errorf("%q is not a valid CIDR", s)
	}
	if n.IP.To4() != nil {
		return n, 4, nil
	}
	return n, 6, nil
}

// validateCIDR checks that s is a CIDR (or bare IP) and returns its version,
// or 0 when it is invalid.
func validateCIDR(p Path, s string, errs *ErrorList) int {
	_, v, err := parseCIDR(s)
	if err != nil {
		errs.Add(p, err.Error())
		return 0
	}
	return v
}

// validateIP checks that s is a plain IP address and returns its version, or
// 0 when invalid.
func validateIP(p Path, s string, errs *ErrorList) int {
	ip := net.ParseIP(s)
	if ip == nil {
		errs.Addf(p, "%q is not a valid IP address", s)
		return 0
	}
	if ip.To4() != nil {
		return 4
	}
	return 6
}

// oneOf reports whether v is among allowed, and adds an error listing the
// allowed values otherwise. Empty v is accepted (unset).
func oneOf(p Path, v string, errs *ErrorList, allowed ...string) bool {
	if v == "" {
		return true
	}
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	errs.Addf(p, "%q is not one of %s", v, strings.Join(allowed, ", "))
	return false
}
