package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/tabbynet/tabby/goldmane/proto"
)

// window reads a request's times (Calico's: 0 is the oldest kept for a
// start and now for an end, positive is seconds since the epoch,
// negative seconds before now) as [gte, lt) in whole intervals.
func (s *Store) window(gte, lt int64, now time.Time) (int64, int64) {
	n := now.Unix()
	switch {
	case gte == 0:
		gte = s.oldest(now)
	case gte < 0:
		gte = n + gte
	}
	switch {
	case lt == 0:
		lt = n + 1
	case lt < 0:
		lt = n + lt
	}
	return s.bucket(gte), lt
}

// List answers Flows.List: one result per key with traffic in the
// window, its intervals summed (start of the first, end of the last),
// filtered, sorted (newest first by default, as Calico; or by the first
// sort option) and paged (page from 0; page_size 0: all).
func (s *Store) List(req *proto.FlowListRequest, now time.Time) *proto.FlowListResult {
	gte, lt := s.window(req.GetStartTimeGte(), req.GetStartTimeLt(), now)
	s.mu.Lock()
	var rs []*proto.FlowResult
	for _, sr := range s.keys {
		if !Match(req.GetFilter(), sr.proto) {
			continue
		}
		var st Stats
		first, last := int64(-1), int64(0)
		for _, w := range sr.windows {
			if w.start < gte || w.start >= lt {
				continue
			}
			if first < 0 {
				first = w.start
			}
			last = w.start
			st.sum(w.stats)
		}
		if first >= 0 {
			rs = append(rs, s.result(sr, first, last+s.ivSeconds(), st))
		}
	}
	s.mu.Unlock()
	by := proto.SortBy_Time
	if o := req.GetSortBy(); len(o) > 0 {
		by = o[0].GetSortBy()
	}
	slices.SortFunc(rs, compareBy(by))
	items, meta := page(rs, req.GetPage(), req.GetPageSize())
	return &proto.FlowListResult{Meta: meta, Flows: items}
}

func compareBy(by proto.SortBy) func(a, b *proto.FlowResult) int {
	return func(a, b *proto.FlowResult) int {
		x, y := a.Flow.Key, b.Flow.Key
		var c int
		switch by {
		case proto.SortBy_DestName:
			c = cmp.Compare(x.DestName, y.DestName)
		case proto.SortBy_DestNamespace:
			c = cmp.Compare(x.DestNamespace, y.DestNamespace)
		case proto.SortBy_DestType:
			c = cmp.Compare(x.DestType, y.DestType)
		case proto.SortBy_SourceName:
			c = cmp.Compare(x.SourceName, y.SourceName)
		case proto.SortBy_SourceNamespace:
			c = cmp.Compare(x.SourceNamespace, y.SourceNamespace)
		case proto.SortBy_SourceType:
			c = cmp.Compare(x.SourceType, y.SourceType)
		}
		return cmp.Or(c, cmp.Compare(b.Flow.EndTime, a.Flow.EndTime), cmp.Compare(b.Flow.StartTime, a.Flow.StartTime),
			cmp.Compare(a.Id, b.Id))
	}
}

func page[T any](all []T, pg, size int64) ([]T, *proto.ListMetadata) {
	total := int64(len(all))
	if size <= 0 {
		pages := int64(0)
		if total > 0 {
			pages = 1
		}
		return all, &proto.ListMetadata{TotalPages: pages, TotalResults: total}
	}
	meta := &proto.ListMetadata{TotalPages: (total + size - 1) / size, TotalResults: total}
	from := max(pg, 0) * size
	if from >= total {
		return nil, meta
	}
	return all[from:min(from+size, total)], meta
}

// FilterHints answers Flows.FilterHints: the distinct values of one
// field among the keys in the window that match the filter, sorted.
func (s *Store) FilterHints(req *proto.FilterHintsRequest, now time.Time) *proto.FilterHintsResult {
	gte, lt := s.window(req.GetStartTimeGte(), req.GetStartTimeLt(), now)
	vals := map[string]bool{}
	s.mu.Lock()
	for _, sr := range s.keys {
		if !Match(req.GetFilter(), sr.proto) || !slices.ContainsFunc(sr.windows, func(w window) bool { return w.start >= gte && w.start < lt }) {
			continue
		}
		for _, v := range hintValues(req.GetType(), sr.proto) {
			if v != "" {
				vals[v] = true
			}
		}
	}
	s.mu.Unlock()
	var hints []*proto.FilterHint
	for v := range vals {
		hints = append(hints, &proto.FilterHint{Value: v})
	}
	slices.SortFunc(hints, func(a, b *proto.FilterHint) int { return cmp.Compare(a.Value, b.Value) })
	items, meta := page(hints, req.GetPage(), req.GetPageSize())
	return &proto.FilterHintsResult{Meta: meta, Hints: items}
}

func hintValues(t proto.FilterType, k *proto.FlowKey) []string {
	switch t {
	case proto.FilterType_FilterTypeDestName:
		return []string{k.DestName}
	case proto.FilterType_FilterTypeSourceName:
		return []string{k.SourceName}
	case proto.FilterType_FilterTypeDestNamespace:
		return []string{k.DestNamespace}
	case proto.FilterType_FilterTypeSourceNamespace:
		return []string{k.SourceNamespace}
	}
	var out []string
	for _, h := range append(slices.Clone(k.GetPolicies().GetEnforcedPolicies()), k.GetPolicies().GetPendingPolicies()...) {
		switch t {
		case proto.FilterType_FilterTypePolicyTier:
			out = append(out, h.Tier)
		case proto.FilterType_FilterTypePolicyName:
			out = append(out, h.Name)
		case proto.FilterType_FilterTypePolicyKind:
			out = append(out, h.Kind.String())
		case proto.FilterType_FilterTypePolicyNamespace:
			out = append(out, h.Namespace)
		}
	}
	return out
}
