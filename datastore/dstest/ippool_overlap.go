package dstest

import (
	"errors"
	"strings"
	"sync"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// testPoolOverlap: a pool overlapping a stored one is refused, naming both
// pools as Calico does; a pool's CIDR cannot be changed by an update (which
// could otherwise move it over another); two overlapping pools created at
// the same moment do not both survive.
func testPoolOverlap(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	big := pool("ov-big", "10.200.0.0/20")
	big.Spec.BlockSize = 24
	mustR(t)(c.Create(ctx, big))

	small := pool("ov-small", "10.200.0.0/24")
	small.Spec.BlockSize = 28
	_, err := c.Create(ctx, small)
	wantErr(t, err, datastore.ErrInvalid)
	if want := "IPPool(ov-small) CIDR overlaps with IPPool(ov-big) CIDR 10.200.0.0/20"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if _, err := c.Get(ctx, datastore.KeyOf(small)); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("refused pool was stored: %v", err)
	}

	// An update may change other fields, not the CIDR.
	other := mustR(t)(c.Create(ctx, pool("ov-other", "10.201.0.0/16"))).(*v3.IPPool)
	moved := other.DeepCopy()
	moved.Spec.CIDR = "10.200.0.0/16"
	_, err = c.Update(ctx, moved)
	wantErr(t, err, datastore.ErrInvalid)
	if !strings.Contains(err.Error(), "IPPool CIDR cannot be modified") {
		t.Fatalf("update error %q", err)
	}
	disabled := other.DeepCopy()
	disabled.Spec.Disabled = true
	mustR(t)(c.Update(ctx, disabled))

	// Racing creates of overlapping pools: at most one is left.
	var wg sync.WaitGroup
	for i, cidr := range []string{"10.202.0.0/20", "10.202.0.0/24"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Create(ctx, pool("ov-race-"+string(rune('a'+i)), cidr))
		}()
	}
	wg.Wait()
	left := 0
	for _, r := range mustL(t)(c.List(ctx, v3.KindIPPool, datastore.ListOptions{})).Items {
		if strings.HasPrefix(r.GetName(), "ov-race-") {
			left++
		}
	}
	if left > 1 {
		t.Fatalf("%d overlapping pools survived a racing create", left)
	}
}
