package calc

import v3 "github.com/tabbynet/tabby/api/v3"

// serviceIndex is the Engine's part of the service sets (services.go):
// the EndpointSlices by service and the wanted sets of each service. A
// slice's change re-counts only its own members in its service's sets; a
// set first wanted counts the members of its service's slices.
type serviceIndex struct {
	slices    map[objKey]*v3.KubernetesEndpointSlice
	byService map[string]map[objKey]*v3.KubernetesEndpointSlice
	sets      map[string]map[string]*setState // by service, then set ID
}

func (x *serviceIndex) init() {
	x.slices = map[objKey]*v3.KubernetesEndpointSlice{}
	x.byService = map[string]map[objKey]*v3.KubernetesEndpointSlice{}
	x.sets = map[string]map[string]*setState{}
}

// setSlice replaces the EndpointSlice of key k by s (nil: deleted).
func (x *labelIndex) setSlice(k objKey, s *v3.KubernetesEndpointSlice) {
	if old := x.svc.slices[k]; old != nil {
		x.countSlice(old, -1)
		svc := old.Service()
		delete(x.svc.byService[svc], k)
		if len(x.svc.byService[svc]) == 0 {
			delete(x.svc.byService, svc)
		}
		delete(x.svc.slices, k)
	}
	if s == nil {
		return
	}
	svc := s.Service()
	if x.svc.byService[svc] == nil {
		x.svc.byService[svc] = map[objKey]*v3.KubernetesEndpointSlice{}
	}
	x.svc.byService[svc][k] = s
	x.svc.slices[k] = s
	x.countSlice(s, +1)
}

// countSlice counts the members s gives in the wanted sets of its
// service once more (by +1) or less (by -1).
func (x *labelIndex) countSlice(s *v3.KubernetesEndpointSlice, by int32) {
	for _, set := range x.svc.sets[s.Service()] {
		for _, m := range appendSliceMembers(nil, set.d, s) {
			set.count(m, by)
		}
		x.touch(set)
	}
}

// want starts following the service of set (a new set: it counts the
// members of the service's slices).
func (x *serviceIndex) want(set *setState) {
	svc := set.d.service
	if x.sets[svc] == nil {
		x.sets[svc] = map[string]*setState{}
	}
	x.sets[svc][set.d.id] = set
	for _, s := range x.byService[svc] {
		for _, m := range appendSliceMembers(nil, set.d, s) {
			set.count(m, +1)
		}
	}
}

// unwant stops following the service of set (no longer wanted).
func (x *serviceIndex) unwant(set *setState) {
	svc := set.d.service
	delete(x.sets[svc], set.d.id)
	if len(x.sets[svc]) == 0 {
		delete(x.sets, svc)
	}
}
