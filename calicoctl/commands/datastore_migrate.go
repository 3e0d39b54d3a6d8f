package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// migrateKinds are the kinds `datastore migrate export` writes, in
// Calico's order (tiers before policies, nodes before the configurations
// that name nodes).
var migrateKinds = []string{
	v3.KindIPPool, v3.KindBGPPeer, v3.KindTier, v3.KindGlobalNetworkPolicy, v3.KindStagedGlobalNetworkPolicy,
	v3.KindGlobalNetworkSet, v3.KindHostEndpoint, v3.KindKubeControllersConfiguration, v3.KindNetworkPolicy,
	v3.KindStagedNetworkPolicy, v3.KindStagedKubernetesNetworkPolicy, v3.KindNetworkSet, v3.KindNode,
	v3.KindBGPConfiguration, v3.KindFelixConfiguration, v3.KindIPReservation, v3.KindBGPFilter,
}

func newDatastoreCmd(a *app) *cobra.Command {
	ds := &cobra.Command{
		Use:   "datastore",
		Short: "Calico datastore management",
		Long: `Manage the datastore: migrate the contents of an etcdv3 datastore to a
Kubernetes datastore (lock, export, import, unlock).`,
		Example: `  calicoctl datastore migrate lock
  calicoctl datastore migrate export > etcd-data.yaml`,
	}
	m := &cobra.Command{
		Use:   "migrate",
		Short: "Migrate the contents of an etcdv3 datastore to a Kubernetes datastore",
		Example: `  DATASTORE_TYPE=etcdv3 calicoctl datastore migrate lock
  DATASTORE_TYPE=etcdv3 calicoctl datastore migrate export > etcd-data
  DATASTORE_TYPE=kubernetes calicoctl datastore migrate import -f etcd-data
  DATASTORE_TYPE=kubernetes calicoctl datastore migrate unlock`,
	}
	requireSubcommand(m)
	m.AddCommand(
		&cobra.Command{
			Use:     "lock",
			Short:   "Lock the datastore to prevent changes during migration",
			Long:    "Set ClusterInformation's datastoreReady to false: Calico components stop changing the datastore until it is unlocked.",
			Example: "  calicoctl datastore migrate lock",
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.setDatastoreReady(cmdContext(cmd), false)
			},
		},
		&cobra.Command{
			Use:     "unlock",
			Short:   "Unlock the datastore to allow changes after migration",
			Example: "  calicoctl datastore migrate unlock",
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.setDatastoreReady(cmdContext(cmd), true)
			},
		},
		newMigrateExportCmd(a),
		newMigrateImportCmd(a),
	)
	ds.AddCommand(m)
	return ds
}

// spec is the datastore configuration commands connect with.
func (a *app) spec() (dsconfig.Spec, error) {
	return dsconfig.Load(a.configPath, a.configExplicit, a.env)
}

func getClusterInfo(ctx context.Context, c datastore.Client) (*v3.ClusterInformation, error) {
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
	if err != nil {
		return nil, err
	}
	return r.(*v3.ClusterInformation), nil
}

// setDatastoreReady locks (false) or unlocks (true) the datastore, as
// Calico's migrate lock and unlock do, creating ClusterInformation first
// when it is missing.
func (a *app) setDatastoreReady(ctx context.Context, ready bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	verb := "unlocking"
	if !ready {
		verb = "locking"
		if err := datastore.EnsureInitialized(ctx, c, a.clientVersion(), ""); err != nil {
			return fmt.Errorf("unable to initialize cluster information for the datastore migration: %w", a.friendly(err))
		}
	}
	for attempt := 0; ; attempt++ {
		ci, err := getClusterInfo(ctx, c)
		if err != nil {
			return fmt.Errorf("error retrieving ClusterInformation for %s: %w", verb, a.friendly(err))
		}
		ci.Spec.DatastoreReady = &ready
		_, err = c.Update(ctx, ci)
		if errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("error updating ClusterInformation for %s: %w", verb, a.friendly(err))
		}
		break
	}
	if ready {
		fmt.Fprint(a.stdout, "Datastore unlocked.\n")
	} else {
		fmt.Fprint(a.stdout, "Datastore locked.\n")
	}
	return nil
}

// checkLocked is Calico's check that the datastore is locked.
func checkLocked(ctx context.Context, c datastore.Client) (bool, error) {
	ci, err := getClusterInfo(ctx, c)
	if err != nil {
		return false, fmt.Errorf("error retrieving ClusterInformation: %w", friendly(err))
	}
	return ci.Spec.DatastoreReady != nil && !*ci.Spec.DatastoreReady, nil
}
