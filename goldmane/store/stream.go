package store

import (
	"cmp"
	"slices"

	"github.com/tabbynet/tabby/goldmane/proto"
)

// Subscription receives the keys changed in each interval (Rollover).
// A subscriber too slow to take them is dropped: its channel closes
// (the client can reconnect), never holding the store.
type Subscription struct {
	C      <-chan []*proto.FlowResult
	c      chan []*proto.FlowResult
	filter *proto.Filter
	store  *Store
}

// Subscribe returns a subscription to the flows matching filter (nil:
// all), and the kept flows that match from startGTE on (seconds since
// the epoch; 0: none, only what comes), one result per key-interval.
func (s *Store) Subscribe(filter *proto.Filter, startGTE int64) (*Subscription, []*proto.FlowResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan []*proto.FlowResult, 16)
	sub := &Subscription{C: c, c: c, filter: filter, store: s}
	s.subs[sub] = struct{}{}
	var past []*proto.FlowResult
	if startGTE > 0 {
		for _, sr := range s.keys {
			if !Match(filter, sr.proto) {
				continue
			}
			for _, w := range sr.windows {
				if w.start >= s.bucket(startGTE) {
					past = append(past, s.result(sr, w.start, w.start+s.ivSeconds(), w.stats))
				}
			}
		}
		slices.SortFunc(past, func(a, b *proto.FlowResult) int {
			return cmp.Or(cmp.Compare(a.Flow.StartTime, b.Flow.StartTime), cmp.Compare(a.Id, b.Id))
		})
	}
	return sub, past
}

// Close ends the subscription (its channel closes).
func (sub *Subscription) Close() {
	sub.store.mu.Lock()
	defer sub.store.mu.Unlock()
	sub.store.unsubscribe(sub)
}

func (s *Store) unsubscribe(sub *Subscription) {
	if _, ok := s.subs[sub]; ok {
		delete(s.subs, sub)
		close(sub.c)
	}
}

// publish hands each subscriber its matching results; s.mu is held.
func (s *Store) publish(rs []*proto.FlowResult) {
	if len(rs) == 0 {
		return
	}
	for sub := range s.subs {
		var mine []*proto.FlowResult
		for _, r := range rs {
			if Match(sub.filter, r.Flow.Key) {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		select {
		case sub.c <- mine:
		default:
			s.unsubscribe(sub)
		}
	}
}

func sortResults(rs []*proto.FlowResult) {
	slices.SortFunc(rs, func(a, b *proto.FlowResult) int { return cmp.Compare(a.Id, b.Id) })
}
