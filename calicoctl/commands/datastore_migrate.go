package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	var importFile string
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
		&cobra.Command{
			Use:   "export",
			Short: "Export the contents of the etcdv3 datastore to yaml",
			Long: `Write every resource of a locked etcdv3 datastore to stdout in Calico's
migration format: the resources as YAML lists, "===", ClusterInformation as
JSON, "===", the IPAM records as JSON. Nodes take the name of their k8s
orchestrator reference, as they will have in the Kubernetes datastore.`,
			Example: "  calicoctl datastore migrate export > etcd-data",
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return a.migrateExport(cmdContext(cmd))
			},
		},
		func() *cobra.Command {
			c := &cobra.Command{
				Use:   "import -f FILE",
				Short: "Store and convert yaml of resources into the Kubernetes datastore",
				Long: `Read a file written by migrate export and store its resources, cluster
identity and IPAM records in an empty Kubernetes datastore (Calico's CRDs
installed), leaving it locked.`,
				Example: "  calicoctl datastore migrate import -f etcd-data",
				Args:    cobra.NoArgs,
				RunE: func(cmd *cobra.Command, _ []string) error {
					return a.migrateImport(cmdContext(cmd), importFile)
				},
			}
			c.Flags().StringVarP(&importFile, "filename", "f", "", "Filename to use to import resources.")
			return c
		}(),
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
			return fmt.Errorf("unable to initialize cluster information for the datastore migration: %w", friendly(err))
		}
	}
	for attempt := 0; ; attempt++ {
		ci, err := getClusterInfo(ctx, c)
		if err != nil {
			return fmt.Errorf("error retrieving ClusterInformation for %s: %w", verb, friendly(err))
		}
		ci.Spec.DatastoreReady = &ready
		_, err = c.Update(ctx, ci)
		if errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("error updating ClusterInformation for %s: %w", verb, friendly(err))
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

func (a *app) migrateExport(ctx context.Context) error {
	spec, err := a.spec()
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	locked, err := checkLocked(ctx, c)
	if err != nil {
		return fmt.Errorf("error while checking if datastore was locked: %w", err)
	}
	if !locked {
		return fmt.Errorf("datastore is not locked. Run the `calicoctl datastore migrate lock` command in order to begin migration")
	}
	if spec.DatastoreType != dsconfig.TypeEtcdV3 {
		return fmt.Errorf("invalid datastore type: %s to export from for datastore migration. Datastore type must be etcdv3", spec.DatastoreType)
	}
	// Written only when complete: a failure part way prints nothing.
	var out bytes.Buffer
	nodeMap := map[string]string{}
	for _, kind := range migrateKinds {
		info, _ := v3.LookupKind(kind)
		l, err := c.List(ctx, kind, datastore.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s: %w", info.Plural, friendly(err))
		}
		if err := l.Complete(); err != nil {
			return fmt.Errorf("listing %s: %w", info.Plural, friendly(err))
		}
		var items []v3.Resource
		for _, r := range l.Items {
			if err := exportRename(r, nodeMap); err != nil {
				return err
			}
			if kind == v3.KindNetworkPolicy && strings.HasPrefix(r.GetName(), "knp.default.") {
				continue // Kubernetes NetworkPolicies: Kubernetes holds them
			}
			r.SetUID("")
			r.SetResourceVersion("")
			r.SetCreationTimestamp(metav1.Time{})
			r.SetDeletionTimestamp(nil)
			r.SetDeletionGracePeriodSeconds(nil)
			items = append(items, r)
		}
		p := &printer{format: "yaml", revision: l.Revision}
		if err := p.printDocument(&out, info, items, true); err != nil {
			return err
		}
		out.WriteString("---\n")
	}
	out.WriteString("===\n")
	ci, err := getClusterInfo(ctx, c)
	if err != nil {
		return fmt.Errorf("reading ClusterInformation: %w", friendly(err))
	}
	js, err := v3.EncodeJSON(ci)
	if err != nil {
		return err
	}
	if err := json.Indent(&out, js, "", "  "); err != nil {
		return err
	}
	out.WriteString("\n===\n")
	m, err := pullIPAM(ctx, c, nodeMap)
	if err != nil {
		return err
	}
	ij, err := m.marshal()
	if err != nil {
		return err
	}
	out.Write(ij)
	out.WriteString("\n")
	_, err = a.stdout.Write(out.Bytes())
	return err
}

// exportRename gives nodes their Kubernetes names (from the k8s
// orchestrator reference, required) and renames the per-node
// configurations (node.<name>) to match.
func exportRename(r v3.Resource, nodeMap map[string]string) error {
	switch o := r.(type) {
	case *v3.Node:
		k8sName := ""
		for _, ref := range o.Spec.OrchRefs {
			if ref.Orchestrator == "k8s" {
				k8sName = ref.NodeName
			}
		}
		if k8sName == "" {
			return fmt.Errorf("unable to process metadata for export for Node resource: node %s missing a 'k8s' orchestrator reference. Unable to export data unless every node has a 'k8s' orchestrator reference", o.Name)
		}
		nodeMap[o.Name] = k8sName
		o.Name = k8sName
	case *v3.FelixConfiguration, *v3.BGPConfiguration:
		if n, ok := strings.CutPrefix(r.GetName(), "node."); ok {
			if k, ok := nodeMap[n]; ok {
				r.SetName("node." + k)
			}
		}
	}
	return nil
}

// splitExport cuts an export into its three sections.
func splitExport(data []byte, path string) (resources, clusterInfo, ipamJSON []byte, err error) {
	parts := bytes.Split(data, []byte("===\n"))
	if len(parts) != 3 {
		return nil, nil, nil, fmt.Errorf("imported file: %s is improperly formatted. Try recreating with 'calicoctl export'", path)
	}
	return parts[0], parts[1], parts[2], nil
}

func (a *app) migrateImport(ctx context.Context, path string) error {
	if path == "" {
		return fmt.Errorf("give the file migrate export wrote with -f FILE")
	}
	spec, err := a.spec()
	if err != nil {
		return err
	}
	if spec.DatastoreType != dsconfig.TypeKubernetes {
		return fmt.Errorf("invalid datastore type: %s to import to for datastore migration. Datastore type must be kubernetes", spec.DatastoreType)
	}
	var data []byte
	if path == "-" {
		data, err = io.ReadAll(a.stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("error while reading migration file: %w", err)
	}
	resPart, ciPart, ipamPart, err := splitExport(data, path)
	if err != nil {
		return err
	}
	docs, err := v3.DecodeYAMLDocuments(resPart)
	if err != nil {
		return fmt.Errorf("failed to import v3 resources: %w", err)
	}
	var exported v3.ClusterInformation
	if err := json.Unmarshal(ciPart, &exported); err != nil {
		return fmt.Errorf("failed to update cluster information: error reading exported cluster info for migration: %w", err)
	}
	var m migrateIPAM
	dec := json.NewDecoder(bytes.NewReader(ipamPart))
	dec.DisallowUnknownFields() // a field Tabby does not know must not be dropped
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("failed to read IPAM resources: %w", err)
	}
	ipamRes, err := m.ipamResources()
	if err != nil {
		return fmt.Errorf("failed to read IPAM resources: %w", err)
	}

	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := checkEmpty(ctx, c); err != nil {
		return fmt.Errorf("datastore already has Calico resources: %w. Clear out all Calico resources by deleting all Calico CRDs", err)
	}
	if err := datastore.EnsureInitialized(ctx, c, a.clientVersion(), ""); err != nil {
		return fmt.Errorf("unable to initialize cluster information for the datastore migration: %w", friendly(err))
	}
	if locked, err := checkLocked(ctx, c); err != nil {
		return fmt.Errorf("error while checking if datastore was locked: %w", err)
	} else if !locked {
		if err := a.setDatastoreReady(ctx, false); err != nil {
			return fmt.Errorf("error while attempting to lock the datastore for import: %w", err)
		}
	}

	applied := 0
	for _, d := range docs {
		r := d.Resource
		if v3.KindOf(r) == v3.KindNode {
			// Nodes come from Kubernetes in this datastore.
			fmt.Fprintf(a.stdout, "[WARNING] Node %s not imported: in the Kubernetes datastore Tabby derives Nodes from Kubernetes nodes.\n", r.GetName())
			continue
		}
		if err := v3.DefaultAndValidate(r); err != nil {
			return fmt.Errorf("failed to import v3 resources: %s %q: %w", v3.KindOf(r), r.GetName(), err)
		}
		if _, err := opApply(ctx, c, r); err != nil {
			return fmt.Errorf("failed to import v3 resources: %s %q: %w", v3.KindOf(r), r.GetName(), friendly(err))
		}
		applied++
	}
	fmt.Fprintln(a.stdout, successMessage("applied", applied, ""))

	for attempt := 0; ; attempt++ {
		ci, err := getClusterInfo(ctx, c)
		if err != nil {
			return fmt.Errorf("failed to update cluster information: %w", friendly(err))
		}
		ci.Spec.CalicoVersion, ci.Spec.ClusterGUID = exported.Spec.CalicoVersion, exported.Spec.ClusterGUID
		if _, err = c.Update(ctx, ci); errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		} else if err != nil {
			return fmt.Errorf("failed to update cluster information: %w", friendly(err))
		}
		break
	}

	done := 0
	for _, r := range ipamRes {
		if _, err := c.Create(ctx, r); err != nil {
			if done > 0 {
				fmt.Fprintf(a.stdout, "Partial success: applied the first %d out of %d resources:\n", done, len(ipamRes))
			}
			return fmt.Errorf("hit error(s): %s %s: %w", v3.KindOf(r), r.GetName(), friendly(err))
		}
		done++
	}
	if len(ipamRes) > 0 {
		fmt.Fprintf(a.stdout, "Successfully applied %d IPAM resource(s)\n", done)
	}
	fmt.Fprint(a.stdout, "Datastore information successfully imported. Please refer to the datastore migration documentation for next steps.\n")
	return nil
}

// checkEmpty refuses a datastore that already has Calico resources
// (besides what the datastore makes itself: the built-in tiers and the
// policies derived from Kubernetes NetworkPolicies) or IPAM records.
func checkEmpty(ctx context.Context, c datastore.Client) error {
	builtIn := map[string]bool{}
	for _, t := range v3.DefaultTiers() {
		builtIn[t.Name] = true
	}
	for _, kind := range append(append([]string{}, migrateKinds...), v3.KindIPAMBlock, v3.KindBlockAffinity, v3.KindIPAMHandle) {
		if kind == v3.KindNode {
			continue // derived from Kubernetes nodes here
		}
		l, err := c.List(ctx, kind, datastore.ListOptions{})
		if err != nil {
			return fmt.Errorf("failed to retrieve %s resources during datastore check: %w", kind, friendly(err))
		}
		for _, r := range l.Items {
			switch {
			case kind == v3.KindTier && builtIn[r.GetName()]:
			case kind == v3.KindNetworkPolicy && strings.HasPrefix(r.GetName(), "knp.default."):
			default:
				return fmt.Errorf("found existing Calico %s resource", kind)
			}
		}
		if len(l.Bad) > 0 {
			return fmt.Errorf("found existing Calico %s resource", kind)
		}
	}
	return nil
}
