package leader

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// TestRelease: the Lease is emptied only while this replica holds it.
func TestRelease(t *testing.T) {
	for _, tc := range []struct {
		holder, want string
	}{{"me", ""}, {"other", "other"}} {
		holder := tc.holder
		kube := fake.NewSimpleClientset(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: DefaultNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseTransitions: new(int32(3))},
		})
		lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: DefaultNamespace},
			Client: kube.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "me"}}
		if err := release(lock, "me"); err != nil {
			t.Fatal(err)
		}
		l, err := kube.CoordinationV1().Leases(DefaultNamespace).Get(context.Background(), DefaultName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if l.Spec.HolderIdentity != nil {
			got = *l.Spec.HolderIdentity
		}
		if got != tc.want {
			t.Errorf("held by %q: after release %q, want %q", tc.holder, got, tc.want)
		}
		if *l.Spec.LeaseTransitions != 3 {
			t.Errorf("transitions %d, want 3 kept", *l.Spec.LeaseTransitions)
		}
	}
}
