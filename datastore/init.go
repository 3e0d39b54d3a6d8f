package datastore

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Variant is what Tabby writes as ClusterInformation.spec.variant.
const Variant = "Tabby"

// EnsureInitialized creates, if missing, the ClusterInformation "default"
// (with a fresh clusterGUID and datastoreReady true) and Calico's built-in
// tiers. It is idempotent and safe to race: a concurrent creator winning
// is success. An existing ClusterInformation is left as it is (an operator
// may have set datastoreReady false on purpose).
func EnsureInitialized(ctx context.Context, c Client, version, clusterType string) error {
	ready := true
	ci := &v3.ClusterInformation{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindClusterInformation, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v3.ClusterInformationSpec{
			ClusterGUID:    string(uuid.NewUUID()),
			ClusterType:    clusterType,
			CalicoVersion:  version,
			DatastoreReady: &ready,
			Variant:        Variant,
		},
	}
	if err := createIfMissing(ctx, c, ci); err != nil {
		return fmt.Errorf("initialising ClusterInformation: %w", err)
	}
	for _, tier := range v3.DefaultTiers() {
		if err := createIfMissing(ctx, c, tier); err != nil {
			return fmt.Errorf("initialising tier %s: %w", tier.Name, err)
		}
	}
	return nil
}

func createIfMissing(ctx context.Context, c Client, r v3.Resource) error {
	if _, err := c.Get(ctx, KeyOf(r)); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	if _, err := c.Create(ctx, r); err != nil && !errors.Is(err, ErrAlreadyExists) {
		return err
	}
	return nil
}
