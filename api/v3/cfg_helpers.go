package v3

import (
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

// Validation helpers shared by the configuration kinds (FelixConfiguration,
// KubeControllersConfiguration). Each adds at most one error for its field.

// cfgCheckDuration rejects negative durations (Calico's CRD pattern only
// admits unsigned durations).
func cfgCheckDuration(p Path, d *metav1.Duration, errs *ErrorList) {
	if d != nil && d.Duration < 0 {
		errs.Addf(p, "must not be negative (got %s)", d.Duration)
	}
}

// cfgCheckInt checks that an optional integer lies in [lo, hi].
func cfgCheckInt(p Path, v *int, lo, hi int, errs *ErrorList) {
	if v != nil && (*v < lo || *v > hi) {
		errs.Addf(p, "%d is outside %d-%d", *v, lo, hi)
	}
}

// cfgCheckMin checks that an optional integer is at least lo.
func cfgCheckMin(p Path, v *int, lo int, errs *ErrorList) {
	if v != nil && *v < lo {
		errs.Addf(p, "%d is below the minimum %d", *v, lo)
	}
}

// cfgCheckEnum checks an exact-case enum (Calico's +kubebuilder Enum).
// Empty means unset and is accepted.
func cfgCheckEnum(p Path, v string, errs *ErrorList, allowed ...string) {
	oneOf(p, v, errs, allowed...)
}

// cfgCheckEnumFold checks an enum that Calico matches case-insensitively
// (its CRD pattern is "(?i)(A|B)"). Empty means unset and is accepted.
func cfgCheckEnumFold(p Path, v string, errs *ErrorList, allowed ...string) {
	if v == "" {
		return
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return
		}
	}
	errs.Addf(p, "%q is not one of %s (any case)", v, strings.Join(allowed, ", "))
}

// cfgCheckRegexp checks that s compiles as a Go regular expression.
func cfgCheckRegexp(p Path, s string, errs *ErrorList) {
	if s == "" {
		return
	}
	if _, err := regexp.Compile(s); err != nil {
		errs.Addf(p, "%q is not a valid regular expression: %v", s, err)
	}
}

// cfgCheckMatch checks s against re, describing the allowed form as want.
func cfgCheckMatch(p Path, s string, re func() *regexp.Regexp, want string, errs *ErrorList) {
	if s != "" && !re().MatchString(s) {
		errs.Addf(p, "%q is not %s", s, want)
	}
}

// cfgCheckCIDRs checks every entry of an optional CIDR list (bare IPs are
// accepted as /32 or /128, as Calico does).
func cfgCheckCIDRs(p Path, list *[]string, errs *ErrorList) {
	if list == nil {
		return
	}
	for i, s := range *list {
		validateCIDR(p.Index(i), s, errs)
	}
}

// cfgCheckPortRange checks a numeric port or port range: no named port, and
// ports within 1-65535 with min <= max (Calico's numorstring.Port rules).
func cfgCheckPortRange(p Path, port *numorstring.Port, errs *ErrorList) {
	if port == nil {
		return
	}
	switch {
	case port.IsNamed():
		errs.Addf(p, "%q is a named port; a port number or min:max range is required", port.PortName)
	case port.MinPort > port.MaxPort:
		errs.Addf(p, "%q has its minimum above its maximum", port.String())
	case port.MinPort < 1:
		errs.Addf(p, "%q is invalid: port numbers must be 1-65535", port.String())
	}
}

// cfgIfaceNameRe is a Linux interface name (Calico's "interface" rule).
var cfgIfaceNameRe = lazyRegexp(`^[a-zA-Z0-9_.-]{1,15}$`)

// cfgIfaceFilterRe is an iptables interface match, which may end in "+".
var cfgIfaceFilterRe = lazyRegexp(`^[a-zA-Z0-9:._+-]{1,15}$`)

// cfgHostAddrRe is a host name or IP address to bind a server to.
var cfgHostAddrRe = lazyRegexp(`^[a-zA-Z0-9:._+-]{1,64}$`)
