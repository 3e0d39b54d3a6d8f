package datastore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

func testPool(name, cidr string, blockSize int) *v3.IPPool {
	p := &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v3.IPPoolSpec{CIDR: cidr, BlockSize: blockSize},
	}
	p.Default()
	return p
}

// The ipamtest store writes like a raw client: it runs PrepareWrite but
// not the datastore-level checks, so it holds whatever the test puts.
func storeWith(t *testing.T, rs ...v3.Resource) *ipamtest.Store {
	t.Helper()
	s := ipamtest.NewStore()
	for _, r := range rs {
		if _, err := s.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestCheckWriteIPPool(t *testing.T) {
	block := &v3.IPAMBlock{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPAMBlock, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "10-60-0-0-26"},
		Spec:       v3.IPAMBlockSpec{CIDR: "10.60.0.0/26", Allocations: make([]*int, 64), Unallocated: seq(64)},
	}
	stored := []v3.Resource{testPool("big", "10.50.0.0/20", 24), testPool("off", "10.70.0.0/16", 26), block}
	stored[1].(*v3.IPPool).Spec.Disabled = true
	tests := []struct {
		name    string
		op      string
		obj     *v3.IPPool
		wantErr string // "" = accepted
	}{
		{"overlapping pool refused naming both", "create", testPool("small", "10.50.0.0/24", 28),
			"spec.cidr: IPPool(small) CIDR overlaps with IPPool(big) CIDR 10.50.0.0/20"},
		{"pool containing another refused", "create", testPool("huge", "10.0.0.0/8", 26),
			"IPPool(huge) CIDR overlaps with IPPool(big) CIDR 10.50.0.0/20; spec.cidr: IPPool(huge) CIDR overlaps with IPPool(off) CIDR 10.70.0.0/16"},
		{"disabled pools count", "create", testPool("under-off", "10.70.1.0/24", 26),
			"IPPool(under-off) CIDR overlaps with IPPool(off) CIDR 10.70.0.0/16"},
		{"adjacent pool accepted", "create", testPool("next", "10.50.16.0/20", 24), ""},
		{"other family accepted", "create", testPool("v6", "fd00::/64", 122), ""},
		{"same name left to the backend", "create", testPool("big", "10.50.0.0/20", 24), ""},
		{"blocks of another size refused", "create", testPool("over-block", "10.60.0.0/16", 24),
			"spec.blockSize: IPPool blocksSize conflicts with existing allocations that use a different blockSize"},
		{"blocks of the same size accepted", "create", testPool("over-block", "10.60.0.0/16", 26), ""},
		{"update keeping the CIDR accepted", "update", func() *v3.IPPool { p := testPool("big", "10.50.0.0/20", 24); p.Spec.Disabled = true; return p }(), ""},
		{"update moving the CIDR refused", "update", testPool("big", "10.50.0.0/16", 24), "spec.cidr: IPPool CIDR cannot be modified"},
		{"update of the block size refused", "update", testPool("big", "10.50.0.0/20", 26), "spec.blockSize: IPPool BlockSize cannot be modified"},
		{"update of a missing pool left to the backend", "update", testPool("nope", "10.0.0.0/8", 26), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := storeWith(t, stored...)
			err := datastore.CheckWrite(context.Background(), s, tc.op, tc.obj)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, datastore.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want ErrInvalid containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestVerifyCreatedUndoesRacingPool: two overlapping pools were both
// created (each checked before the other existed). Verifying the later one
// deletes it and names the earlier; the earlier then verifies clean.
func TestVerifyCreatedUndoesRacingPool(t *testing.T) {
	ctx := context.Background()
	s := storeWith(t)
	first, err := s.Create(ctx, testPool("first", "10.50.0.0/20", 24))
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Create(ctx, testPool("second", "10.50.0.0/24", 28))
	if err != nil {
		t.Fatal(err)
	}
	err = datastore.VerifyCreated(ctx, s, second)
	if !errors.Is(err, datastore.ErrInvalid) || !strings.Contains(err.Error(), "IPPool(second) CIDR overlaps with IPPool(first) CIDR 10.50.0.0/20") {
		t.Fatalf("VerifyCreated(second) = %v", err)
	}
	if _, err := s.Get(ctx, datastore.KeyOf(second)); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("the losing pool is still stored: %v", err)
	}
	if err := datastore.VerifyCreated(ctx, s, first); err != nil {
		t.Fatalf("VerifyCreated(first) = %v", err)
	}
	if _, err := s.Get(ctx, datastore.KeyOf(first)); err != nil {
		t.Fatal(err)
	}
}

// A pool changed since its create (someone already updated it) is not
// deleted by the undo: the error says it could not be undone.
func TestVerifyCreatedKeepsChangedPool(t *testing.T) {
	ctx := context.Background()
	s := storeWith(t, testPool("first", "10.50.0.0/20", 24))
	second, err := s.Create(ctx, testPool("second", "10.50.0.0/24", 28))
	if err != nil {
		t.Fatal(err)
	}
	changed := second.DeepCopyObject().(*v3.IPPool)
	changed.Spec.NATOutgoing = true
	if _, err := s.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	err = datastore.VerifyCreated(ctx, s, second)
	if err == nil || !strings.Contains(err.Error(), "could not be undone") {
		t.Fatalf("VerifyCreated = %v", err)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
