package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindIPReservation is the kind of a set of addresses IPAM must not hand out.
const KindIPReservation = "IPReservation"

// IPReservation reserves IP addresses so that Calico IPAM does not assign
// them. Reservations only block new assignments; addresses already in use
// are not released. It suits small numbers of addresses relative to a pool:
// reserving most of a pool makes IPAM hunt for a free address.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=ipreservations
type IPReservation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPReservationSpec `json:"spec,omitempty"`
}

// IPReservationSpec is the content of an IPReservation.
type IPReservationSpec struct {
	// ReservedCIDRs lists the CIDRs and/or single IP addresses that IPAM
	// excludes from new assignments.
	// +listType=set
	ReservedCIDRs []string `json:"reservedCIDRs,omitempty"`
}

// IPReservationList is a list of IPReservation.
// +kubebuilder:object:root=true
type IPReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPReservation `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindIPReservation, Plural: "ipreservations",
		New:     func() Resource { return &IPReservation{TypeMeta: typeMeta(KindIPReservation)} },
		NewList: func() runtimeObject { return &IPReservationList{TypeMeta: typeMeta(KindIPReservation + "List")} },
	})
}

// Default implements Resource; IPReservation has no defaults.
func (r *IPReservation) Default() {}

// Validate implements Resource. Each entry is a CIDR or a bare IP (Calico's
// "cidrs" rule: host bits may be set, the whole CIDR is reserved); entries
// may not repeat. (Calico's schema also wants the prefix length written:
// checked on write, see WriteRules.)
func (r *IPReservation) Validate() ErrorList {
	errs := validateMeta(&r.ObjectMeta, false)
	p := Path("spec").Child("reservedCIDRs")
	for i, c := range r.Spec.ReservedCIDRs {
		if _, _, _, err := netParseIPOrCIDR(c); err != nil {
			errs.Add(p.Index(i), err.Error())
		}
	}
	netCheckUnique(p, r.Spec.ReservedCIDRs, &errs)
	return errs
}
