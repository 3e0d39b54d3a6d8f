package v3

import (
	"net"
	"strings"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// Helpers shared by the policy-side kinds (policies, tiers, profiles,
// network sets and endpoints). Unexported names start with "pol" so they do
// not collide with the helpers of other kinds in this package.

const (
	polNameLabelFmt     = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
	polNameSubdomainFmt = polNameLabelFmt + `(\.` + polNameLabelFmt + `)*`

	// polMaxSelectorLen is the longest selector Calico's CRDs accept.
	polMaxSelectorLen = 1024
	// polMaxRules is the most rules Calico allows in one direction of a
	// policy or profile.
	polMaxRules = 1024
	// polMaxAnnotationBytes caps the total size of rule annotations, as
	// Kubernetes caps object annotations.
	polMaxAnnotationBytes = 256 * 1024
)

var (
	// polNameRE is Calico's "name" rule: a DNS-1123 subdomain.
	polNameRE = lazyRegexp("^" + polNameSubdomainFmt + "$")
	// polTierNameRE: tier names are single DNS labels (no dots), because
	// they appear inside other names and in a label value.
	polTierNameRE = lazyRegexp("^" + polNameLabelFmt + "$")
	// polNetworkPolicyNameRE: a label, a label with one dot (the legacy
	// "<tier>.<name>" form, no longer required to match the tier), or the
	// names Calico gives converted Kubernetes and OpenStack policies.
	polNetworkPolicyNameRE = lazyRegexp(`^((` + polNameLabelFmt + `)(\.` + polNameLabelFmt + `)?|((knp|ossg)\.default\.(` + polNameSubdomainFmt + `)))$`)
	// polGlobalNetworkPolicyNameRE: a label, optionally with one dot.
	polGlobalNetworkPolicyNameRE = lazyRegexp(`^(` + polNameLabelFmt + `\.)?` + polNameLabelFmt + `$`)
	// polInterfaceRE is a Linux interface name.
	polInterfaceRE   = lazyRegexp(`^[a-zA-Z0-9_.-]{1,15}$`)
	polContainerIDRE = lazyRegexp(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)
)

// polCheckName adds an error unless s is a DNS-1123 subdomain (Calico's
// rule for names that refer to other resources).
func polCheckName(p Path, s string, errs *ErrorList) {
	if !polNameRE().MatchString(s) || len(s) > k8svalidation.DNS1123SubdomainMaxLength {
		errs.Addf(p, "%q is not a valid name: use lower-case alphanumerics, '-' and '.', starting and ending with an alphanumeric, at most 253 characters", s)
	}
}

// polCheckTierName adds an error unless s is a valid tier name.
func polCheckTierName(p Path, s string, errs *ErrorList) {
	if !polTierNameRE().MatchString(s) || len(s) > k8svalidation.DNS1123LabelMaxLength {
		errs.Addf(p, "%q is not a valid tier name: use lower-case alphanumerics and '-' (no '.'), at most 63 characters", s)
	}
}

// polParseNet parses a CIDR or bare IP for the fields Calico checks with its
// "net" rule: the address must be the network address (no host bits set).
// It returns the IP version, or 0 after adding an error.
func polParseNet(p Path, s string, errs *ErrorList) int {
	if !strings.Contains(s, "/") {
		return validateIP(p, s, errs)
	}
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		errs.Addf(p, "%q is not a valid CIDR", s)
		return 0
	}
	if !ip.Equal(n.IP) {
		errs.Addf(p, "%q has host bits set: use the network address %q", s, n.String())
		return 0
	}
	if n.IP.To4() != nil {
		return 4
	}
	return 6
}

// polCheckSelector checks a selector that may be empty: it must parse and
// fit Calico's length limit.
func polCheckSelector(p Path, s string, errs *ErrorList) {
	if len(s) > polMaxSelectorLen {
		errs.Addf(p, "selector is %d characters long, more than the %d allowed", len(s), polMaxSelectorLen)
		return
	}
	errs.Extend(validateSelector(p, s))
}

// polCheckNoGlobal rejects global() outside an EntityRule namespaceSelector.
func polCheckNoGlobal(p Path, s string, errs *ErrorList) {
	if strings.Contains(s, "global(") {
		errs.Addf(p, "global() can only be used in a rule's namespaceSelector, not here (got %q)", s)
	}
}

// polDefaultTypes fills an empty types list as Calico does: Ingress when
// there are no egress rules (even with no rules at all), Egress when there
// are only egress rules, and both when there are both.
func polDefaultTypes(ingress, egress []Rule, types *[]PolicyType) {
	if len(*types) != 0 {
		return
	}
	switch {
	case len(egress) == 0:
		*types = []PolicyType{PolicyTypeIngress}
	case len(ingress) == 0:
		*types = []PolicyType{PolicyTypeEgress}
	default:
		*types = []PolicyType{PolicyTypeIngress, PolicyTypeEgress}
	}
}

// polCheckTypes checks a policy's types: Ingress or Egress, each at most
// once. Calico deliberately does not require the types to agree with the
// rules present (so a policy can be written for old and new Felix alike).
func polCheckTypes(p Path, types []PolicyType, errs *ErrorList) {
	seen := map[PolicyType]bool{}
	for i, t := range types {
		switch t {
		case PolicyTypeIngress, PolicyTypeEgress:
		default:
			errs.Addf(p.Index(i), "%q is not a policy type: use Ingress or Egress", t)
			continue
		}
		if seen[t] {
			errs.Addf(p.Index(i), "%q is listed more than once", t)
		}
		seen[t] = true
	}
}

// polCheckPerfHints checks performanceHints: known values, no repeats.
func polCheckPerfHints(p Path, hints []PolicyPerformanceHint, errs *ErrorList) {
	seen := map[PolicyPerformanceHint]bool{}
	for i, h := range hints {
		if h != PerfHintAssumeNeededOnEveryNode {
			errs.Addf(p.Index(i), "%q is not a performance hint: use %s", h, PerfHintAssumeNeededOnEveryNode)
			continue
		}
		if seen[h] {
			errs.Addf(p.Index(i), "%q is listed more than once", h)
		}
		seen[h] = true
	}
}

// polCheckRuleCount enforces Calico's limit on rules per direction.
func polCheckRuleCount(p Path, rules []Rule, errs *ErrorList) {
	if len(rules) > polMaxRules {
		errs.Addf(p, "has %d rules, more than the %d allowed", len(rules), polMaxRules)
	}
}

// polCheckNoNamespaceLabel rejects the label Calico reserves for mapping a
// resource's namespace into the datamodel.
func polCheckNoNamespaceLabel(labels map[string]string, errs *ErrorList) {
	const reserved = "projectcalico.org/namespace"
	if _, ok := labels[reserved]; ok {
		errs.Addf(Path("metadata.labels").Key(reserved), "%s is reserved for Calico's own use and cannot be set", reserved)
	}
}
