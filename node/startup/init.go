package startup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: v3.GroupVersion}
}

// InitDatastore creates what a fresh datastore lacks, as calico-node's
// startup does: ClusterInformation (or brings an existing one up to date),
// the built-in tiers, the global FelixConfiguration (reportingInterval 0,
// logSeverityScreen Info), on etcd the node's FelixConfiguration
// (defaultEndpointToHostAction Return), the default BGPConfiguration and
// IPAMConfiguration, and the default pools of the IP versions that have
// no pool at all. Everything is create-if-missing: racing nodes are fine.
// kdd says the datastore is Kubernetes (Calico appends "kdd" to the
// cluster type).
func InitDatastore(ctx context.Context, c datastore.Client, cfg Config, version string, kdd bool, log *slog.Logger) error {
	clusterType := cfg.ClusterType
	if kdd {
		clusterType = strings.TrimSuffix(clusterType, ",")
		if clusterType != "" {
			clusterType += ","
		}
		clusterType += "kdd"
	}
	if err := EnsureClusterInformation(ctx, c, version, clusterType); err != nil {
		return fmt.Errorf("initialising ClusterInformation: %w", err)
	}
	for _, t := range v3.DefaultTiers() {
		if err := createIfMissing(ctx, c, t); err != nil {
			return fmt.Errorf("initialising tier %s: %w", t.Name, err)
		}
	}
	if err := ensureFelixConfig(ctx, c, "default", func(s *v3.FelixConfigurationSpec) bool {
		changed := false
		if s.ReportingInterval == nil {
			s.ReportingInterval, changed = &metav1.Duration{}, true
		}
		if s.LogSeverityScreen == "" {
			s.LogSeverityScreen, changed = "Info", true
		}
		return changed
	}); err != nil {
		return err
	}
	if !kdd {
		if err := ensureFelixConfig(ctx, c, v3.FelixConfigurationNamePrefix+cfg.NodeName, func(s *v3.FelixConfigurationSpec) bool {
			if s.DefaultEndpointToHostAction != "" {
				return false
			}
			s.DefaultEndpointToHostAction = "Return"
			return true
		}); err != nil {
			return err
		}
	}
	if err := createIfMissing(ctx, c, &v3.BGPConfiguration{TypeMeta: typeMeta(v3.KindBGPConfiguration),
		ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		return fmt.Errorf("initialising the default BGPConfiguration: %w", err)
	}
	auto := true
	vmp := v3.VMAddressPersistenceEnabled
	if err := createIfMissing(ctx, c, &v3.IPAMConfiguration{TypeMeta: typeMeta(v3.KindIPAMConfiguration),
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v3.IPAMConfigurationSpec{AutoAllocateBlocks: &auto, KubeVirtVMAddressPersistence: &vmp}}); err != nil {
		return fmt.Errorf("initialising the default IPAMConfiguration: %w", err)
	}
	return EnsureDefaultPools(ctx, c, cfg.Pools, log)
}

// EnsureClusterInformation creates ClusterInformation "default" with a new
// clusterGUID (32 hex digits, as Calico's), calicoVersion and
// datastoreReady true, or updates an existing one as Calico does: the
// version is replaced, a missing GUID filled in, a missing datastoreReady
// set to true (an explicit false is left: an operator set it), and the
// cluster types merged in.
func EnsureClusterInformation(ctx context.Context, c datastore.Client, version, clusterType string) error {
	key := datastore.Key{Kind: v3.KindClusterInformation, Name: "default"}
	for attempt := 0; ; attempt++ {
		r, err := c.Get(ctx, key)
		if errors.Is(err, datastore.ErrNotFound) {
			ready := true
			ci := &v3.ClusterInformation{TypeMeta: typeMeta(v3.KindClusterInformation), ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: v3.ClusterInformationSpec{ClusterGUID: newGUID(), ClusterType: clusterType, CalicoVersion: version,
					DatastoreReady: &ready, Variant: datastore.Variant}}
			_, err = c.Create(ctx, ci)
			if errors.Is(err, datastore.ErrAlreadyExists) && attempt < 10 {
				continue // another node got there first: merge into theirs
			}
			return err
		}
		if err != nil {
			return err
		}
		ci := r.(*v3.ClusterInformation)
		s := &ci.Spec
		changed := false
		if version != "" && s.CalicoVersion != version {
			s.CalicoVersion, changed = version, true
		}
		if s.ClusterGUID == "" {
			s.ClusterGUID, changed = newGUID(), true
		}
		if s.DatastoreReady == nil {
			ready := true
			s.DatastoreReady, changed = &ready, true
		}
		if merged := mergeTypes(s.ClusterType, clusterType); merged != s.ClusterType {
			s.ClusterType, changed = merged, true
		}
		if !changed {
			return nil
		}
		_, err = c.Update(ctx, ci)
		if errors.Is(err, datastore.ErrConflict) && attempt < 10 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		return err
	}
}

// mergeTypes appends the comma-separated types of add missing from have.
func mergeTypes(have, add string) string {
	if have == "" {
		return add
	}
	types := strings.Split(have, ",")
	for _, t := range strings.Split(add, ",") {
		if t != "" && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	return strings.Join(types, ",")
}

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // a version 4 UUID, hex-encoded as Calico's
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// ensureFelixConfig creates the FelixConfiguration name with the fields
// set sets, or sets them on the existing one when set says it changed
// something.
func ensureFelixConfig(ctx context.Context, c datastore.Client, name string, set func(*v3.FelixConfigurationSpec) bool) error {
	for attempt := 0; ; attempt++ {
		r, err := c.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: name})
		if errors.Is(err, datastore.ErrNotFound) {
			fc := &v3.FelixConfiguration{TypeMeta: typeMeta(v3.KindFelixConfiguration), ObjectMeta: metav1.ObjectMeta{Name: name}}
			set(&fc.Spec)
			_, err = c.Create(ctx, fc)
			if errors.Is(err, datastore.ErrAlreadyExists) && attempt < 5 {
				continue
			}
		} else if err == nil {
			fc := r.(*v3.FelixConfiguration)
			if !set(&fc.Spec) {
				return nil
			}
			_, err = c.Update(ctx, fc)
			if errors.Is(err, datastore.ErrConflict) && attempt < 5 {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("initialising FelixConfiguration %s: %w", name, err)
		}
		return nil
	}
}

// EnsureDefaultPools creates each pool whose IP version has no pool yet.
// A pool of that version created meanwhile by another node is fine.
func EnsureDefaultPools(ctx context.Context, c datastore.Client, pools []*v3.IPPool, log *slog.Logger) error {
	if len(pools) == 0 {
		return nil
	}
	list, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing IP pools: %w", err)
	}
	has := map[bool]bool{} // by Is4
	for _, it := range list.Items {
		if p, err := netip.ParsePrefix(it.(*v3.IPPool).Spec.CIDR); err == nil {
			has[p.Addr().Is4()] = true
		}
	}
	for _, p := range pools {
		cidr := netip.MustParsePrefix(p.Spec.CIDR)
		if has[cidr.Addr().Is4()] {
			continue
		}
		if _, err := c.Create(ctx, p.DeepCopy()); err != nil && !errors.Is(err, datastore.ErrAlreadyExists) {
			return fmt.Errorf("creating the default pool %s (%s): %w", p.Name, p.Spec.CIDR, err)
		}
		if log != nil {
			log.Info("created the default IP pool", "name", p.Name, "cidr", p.Spec.CIDR, "ipipMode", p.Spec.IPIPMode,
				"vxlanMode", p.Spec.VXLANMode, "natOutgoing", p.Spec.NATOutgoing, "blockSize", p.Spec.BlockSize)
		}
	}
	return nil
}

func createIfMissing(ctx context.Context, c datastore.Client, r v3.Resource) error {
	if _, err := c.Get(ctx, datastore.KeyOf(r)); err == nil || !errors.Is(err, datastore.ErrNotFound) {
		return err
	}
	if _, err := c.Create(ctx, r); err != nil && !errors.Is(err, datastore.ErrAlreadyExists) {
		return err
	}
	return nil
}
