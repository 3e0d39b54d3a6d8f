package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// blockQueue combines the concurrent writes one Allocator makes to one
// block. The first writer becomes the leader and writes its change; the
// writers that arrive meanwhile queue, and the next leader (the oldest of
// them) applies all their changes to the block at once and writes them
// with a single compare-and-swap. Goroutines of one process therefore
// neither lose CAS races to each other nor wait one round trip each.
type blockQueue struct {
	mu      sync.Mutex
	pending []*blockOp
	leading bool
}

type blockOp struct {
	ctx    context.Context
	mutate func(*v3.IPAMBlock) error
	done   chan struct{} // closed when resolved
	wake   chan struct{} // closed when this op's goroutine is to lead
	block  *v3.IPAMBlock
	err    error
}

func (op *blockOp) resolve(b *v3.IPAMBlock, err error) {
	op.block, op.err = b, err
	close(op.done)
}

// updateBlock applies mutate to the current block and writes it with
// compare-and-swap, re-reading and re-applying on conflict. The first
// attempt uses the cached block when there is one (saving a read in the
// steady state). mutate may run several times and on a block that other
// queued changes have already been applied to; it returns errNoChange to
// skip its change (the block is returned) or another error to abort its
// change. ErrNotFound (wrapped) when the block does not exist.
func (a *Allocator) updateBlock(ctx context.Context, cidr netip.Prefix, mutate func(*v3.IPAMBlock) error) (*v3.IPAMBlock, error) {
	qi, _ := a.queues.LoadOrStore(cidr, &blockQueue{})
	q := qi.(*blockQueue)
	op := &blockOp{ctx: ctx, mutate: mutate, done: make(chan struct{}), wake: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, op)
	if q.leading {
		q.mu.Unlock()
		select {
		case <-op.done:
			return op.block, op.err
		case <-op.wake:
			q.mu.Lock()
		}
	} else {
		q.leading = true
	}
	// Lead: write everything queued, then hand over to the oldest waiter
	// (so no leader serves others forever).
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()
	a.writeBatch(cidr, batch)
	q.mu.Lock()
	if len(q.pending) > 0 {
		close(q.pending[0].wake)
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	<-op.done
	return op.block, op.err
}

// writeBatch applies the batch's mutations in order to one copy of the
// block and writes it once, resolving every op. The datastore calls are
// not cut short by one caller's cancellation: the others still want them.
func (a *Allocator) writeBatch(cidr netip.Prefix, batch []*blockOp) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), 30*time.Second)
	defer cancel()
	var live []*blockOp
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.resolve(nil, err)
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	failAll := func(err error) {
		for _, op := range live {
			op.resolve(nil, err)
		}
	}
	b := a.cachedBlock(cidr)
	for attempt := 0; attempt < a.cfg.MaxRetries; attempt++ {
		fromCache := b != nil
		if b == nil {
			var err error
			if b, err = a.getBlock(ctx, cidr); err != nil {
				failAll(fmt.Errorf("reading block %s: %w", cidr, err))
				return
			}
		}
		if b.Spec.Deleted {
			failAll(fmt.Errorf("block %s is being deleted: %w", cidr, datastore.ErrNotFound))
			return
		}
		work := b.DeepCopy()
		errs := make([]error, len(live))
		changed, refused := false, false
		for i, op := range live {
			before := work.DeepCopy()
			if err := op.mutate(work); err != nil {
				work, errs[i] = before, err
				// A decision not to write must rest on the stored block,
				// not on a possibly stale cached copy.
				refused = refused || (fromCache && !errors.Is(err, errNothingToDo))
				continue
			}
			changed = true
		}
		if refused {
			b = nil
			attempt--
			continue
		}
		if !changed {
			for i, op := range live {
				if errs[i] == nil || errors.Is(errs[i], errNoChange) {
					op.resolve(b, nil)
				} else {
					op.resolve(nil, errs[i])
				}
			}
			return
		}
		r, err := a.c.Update(ctx, work)
		if err == nil {
			nb := r.(*v3.IPAMBlock)
			a.storeBlock(cidr, nb)
			for i, op := range live {
				if errs[i] == nil || errors.Is(errs[i], errNoChange) {
					op.resolve(nb, nil)
				} else {
					op.resolve(nil, errs[i])
				}
			}
			return
		}
		b = nil
		a.storeBlock(cidr, nil)
		if !errors.Is(err, datastore.ErrConflict) {
			failAll(fmt.Errorf("writing block %s: %w", cidr, err))
			return
		}
		if err := backoff(ctx, attempt); err != nil {
			failAll(err)
			return
		}
	}
	failAll(fmt.Errorf("writing block %s: %w", cidr, ErrTooManyRetries))
}
