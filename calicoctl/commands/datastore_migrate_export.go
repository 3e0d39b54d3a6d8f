package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// newMigrateExportCmd is datastore migrate export.
func newMigrateExportCmd(a *app) *cobra.Command {
	return &cobra.Command{
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
	}
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
			return fmt.Errorf("listing %s: %w", info.Plural, a.friendly(err))
		}
		if err := l.Complete(); err != nil {
			return fmt.Errorf("listing %s: %w", info.Plural, a.friendly(err))
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
		return fmt.Errorf("reading ClusterInformation: %w", a.friendly(err))
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
