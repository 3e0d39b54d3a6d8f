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

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// newMigrateImportCmd is datastore migrate import.
func newMigrateImportCmd(a *app) *cobra.Command {
	var importFile string
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
		return fmt.Errorf("unable to initialize cluster information for the datastore migration: %w", a.friendly(err))
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
			return fmt.Errorf("failed to import v3 resources: %s %q: %w", v3.KindOf(r), r.GetName(), a.friendly(err))
		}
		applied++
	}
	fmt.Fprintln(a.stdout, successMessage("applied", applied, ""))

	for attempt := 0; ; attempt++ {
		ci, err := getClusterInfo(ctx, c)
		if err != nil {
			return fmt.Errorf("failed to update cluster information: %w", a.friendly(err))
		}
		ci.Spec.CalicoVersion, ci.Spec.ClusterGUID = exported.Spec.CalicoVersion, exported.Spec.ClusterGUID
		if _, err = c.Update(ctx, ci); errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		} else if err != nil {
			return fmt.Errorf("failed to update cluster information: %w", a.friendly(err))
		}
		break
	}

	done := 0
	for _, r := range ipamRes {
		if _, err := c.Create(ctx, r); err != nil {
			if done > 0 {
				fmt.Fprintf(a.stdout, "Partial success: applied the first %d out of %d resources:\n", done, len(ipamRes))
			}
			return fmt.Errorf("hit error(s): %s %s: %w", v3.KindOf(r), r.GetName(), a.friendly(err))
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
