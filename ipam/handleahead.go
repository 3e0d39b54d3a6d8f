package ipam

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// An allocation makes two writes: the block (taking the addresses) and the
// handle (recording them under their owner). They are independent, so when
// the cache can tell which block each address will come from, AutoAssign
// creates the handle at the same time as it writes the block: one round
// trip of latency instead of two. When the cache cannot tell (the node
// has no block with room yet: a claim comes first), the handle is created
// as the first block write goes out, for that block. The guess only saves
// time: when it is
// wrong the handle is corrected afterwards, so a successful allocation
// returns with the handle recording exactly its addresses; when the
// allocation fails the handle is taken back. (A handle briefly ahead of its
// block is what Calico, which writes the handle first, also shows. If the
// create itself fails ambiguously the record may name the guessed block
// only: ReleaseByHandle then finds the addresses by a block scan.)

// handleAhead is a handle create running alongside the block writes.
type handleAhead struct {
	counts map[string]int // block CIDR -> addresses, as guessed
	done   chan error     // the create's result; read once by wait
	err    error
	waited bool
}

// guessBlocks returns the block counts an allocation will most likely
// write: for each version, the first block assignVersion will try, when
// the cache says it has room for all the version's addresses. nil when
// that is not so for some version (no guess: the handle is then created
// alongside the first block write, see AutoAssign).
func (a *Allocator) guessBlocks(node string, reserved Reservations, want []versionWant) map[string]int {
	counts := map[string]int{}
	a.mu.Lock()
	defer a.mu.Unlock()
	cached, ok := a.affine[node]
	if !ok {
		return nil
	}
	for _, v := range want {
		if v.n == 0 {
			continue
		}
		// The first block assignVersion will try: the first one in pool
		// order not known to be full.
		var first netip.Prefix
		for _, p := range v.pools {
			for _, c := range cached {
				if !p.CIDR.Contains(c.Addr()) || c.Bits() < p.CIDR.Bits() {
					continue
				}
				if b := a.blocks[c]; b != nil && FreeCount(b, reserved) == 0 {
					continue
				}
				first = c
				break
			}
			if first.IsValid() {
				break
			}
		}
		b := a.blocks[first]
		if b == nil || b.Spec.Affinity == nil || *b.Spec.Affinity != AffinityValue(node) || FreeCount(b, reserved) < v.n {
			return nil
		}
		counts[first.String()] += v.n
	}
	return counts
}

// startHandle creates the handle with counts in the background. The
// caller must call finish or undo on every path.
func (a *Allocator) startHandle(ctx context.Context, handle string, counts map[string]int) *handleAhead {
	h := &handleAhead{counts: counts, done: make(chan error, 1)}
	go func() {
		_, err := a.c.Create(ctx, newHandle(handle, counts))
		h.done <- err
	}()
	return h
}

func (h *handleAhead) wait() error {
	if !h.waited {
		h.err, h.waited = <-h.done, true
	}
	return h.err
}

// finish makes the handle record done: nothing more when the guess was
// right, a correction when not, the usual add when the handle existed
// already.
func (a *Allocator) finish(ctx context.Context, handle string, h *handleAhead, done []assigned) error {
	err := h.wait()
	switch {
	case errors.Is(err, datastore.ErrAlreadyExists):
		// Not ours: the handle held addresses before this call.
		return a.addToHandle(ctx, handle, done)
	case err != nil:
		return fmt.Errorf("recording handle %s: %w", handle, err)
	}
	diff := maps.Clone(h.counts)
	for _, d := range done {
		diff[d.block.String()]--
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(diff)), func(n int) bool { return n != 0 }) {
		return nil
	}
	return a.changeHandle(ctx, handle, func(cur map[string]int) {
		for k, n := range diff {
			cur[k] -= n
		}
	})
}

// undo takes back what the background create recorded, after the
// allocation failed.
func (a *Allocator) undo(ctx context.Context, handle string, h *handleAhead) {
	if h.wait() != nil {
		return // not created (or not ours to change)
	}
	ctx, cancel := rollbackCtx(ctx)
	defer cancel()
	if err := a.changeHandle(ctx, handle, func(cur map[string]int) {
		for k, n := range h.counts {
			cur[k] -= n
		}
	}); err != nil {
		a.log.Error("taking back a handle after a failed allocation failed; GC will reclaim it", "handle", handle, "err", err)
	}
}

func newHandle(handle string, counts map[string]int) *v3.IPAMHandle {
	return &v3.IPAMHandle{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPAMHandle, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: HandleName(handle)},
		Spec:       v3.IPAMHandleSpec{HandleID: handle, Block: counts},
	}
}

// blockCounts is the per-block count of addresses in done.
func blockCounts(done []assigned) map[string]int {
	counts := map[string]int{}
	for _, d := range done {
		counts[d.block.String()]++
	}
	return counts
}
