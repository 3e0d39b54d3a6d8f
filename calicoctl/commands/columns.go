package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"text/template"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// kindTable is how `get` shows one kind as a table: Calico's default and
// wide headings, and for every heading a Go template over the resource
// (the same templates a user can name with -o custom-columns=...). The
// templates run on the api/v3 structs, whose field names are Calico's, so
// cells print exactly as Calico's calicoctl prints them.
type kindTable struct {
	names   []string // what users type, besides the kind and its plural
	headers []string
	wide    []string
	cells   map[string]string
}

const nameCell = "{{.ObjectMeta.Name}}"
const nsCell = "{{.ObjectMeta.Namespace}}"

var policyCells = map[string]string{"NAME": nameCell, "ORDER": "{{.Spec.Order}}", "SELECTOR": "{{.Spec.Selector}}", "TIER": "{{.Spec.Tier}}"}

func withNamespace(m map[string]string) map[string]string {
	out := map[string]string{"NAMESPACE": nsCell}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// kindTables follows Calico calicoctl's resourcemgr registrations.
var kindTables = map[string]kindTable{
	v3.KindBGPConfiguration: {
		names:   []string{"bgpconfig", "bgpconfigs"},
		headers: []string{"NAME", "LOGSEVERITY", "MESHENABLED", "ASNUMBER"},
		wide:    []string{"NAME", "LOGSEVERITY", "MESHENABLED", "ASNUMBER"},
		cells: map[string]string{"NAME": nameCell, "LOGSEVERITY": "{{.Spec.LogSeverityScreen}}",
			"MESHENABLED": "{{if .Spec.NodeToNodeMeshEnabled}}{{.Spec.NodeToNodeMeshEnabled}}{{ else }}-{{ end }}",
			"ASNUMBER":    "{{if .Spec.ASNumber}}{{.Spec.ASNumber}}{{ else }}-{{ end }}"},
	},
	v3.KindBGPFilter: {
		names:   []string{"bgpf", "bgpfs", "bf", "bfs"},
		headers: []string{"NAME", "NUMEXPORTV4", "NUMIMPORTV4", "NUMEXPORTV6", "NUMIMPORTV6"},
		wide:    []string{"NAME", "NUMEXPORTV4", "NUMIMPORTV4", "NUMEXPORTV6", "NUMIMPORTV6"},
		cells: map[string]string{"NAME": nameCell, "NUMEXPORTV4": "{{ len .Spec.ExportV4}}", "NUMIMPORTV4": "{{ len .Spec.ImportV4}}",
			"NUMEXPORTV6": "{{ len .Spec.ExportV6}}", "NUMIMPORTV6": "{{ len .Spec.ImportV6}}"},
	},
	v3.KindBGPPeer: {
		names:   []string{"bgpp", "bgpps", "bp", "bps"},
		headers: []string{"NAME", "PEERIP", "NODE", "ASN"},
		wide:    []string{"NAME", "PEERIP", "NODE", "ASN"},
		cells: map[string]string{"NAME": nameCell, "PEERIP": "{{.Spec.PeerIP}}", "ASN": "{{.Spec.ASNumber}}",
			"NODE": "{{ if eq .Spec.Node `` }}{{ if eq .Spec.NodeSelector `` }}(global){{ else }}{{.Spec.NodeSelector}}{{ end }}{{ else }}{{.Spec.Node}}{{ end }}"},
	},
	v3.KindClusterInformation: {
		names:   []string{"clusterinfo", "clusterinfos"},
		headers: []string{"NAME", "CLUSTERGUID", "CLUSTERTYPE", "CALICOVERSION", "DATASTOREREADY"},
		wide:    []string{"NAME", "CLUSTERGUID", "CLUSTERTYPE", "CALICOVERSION", "DATASTOREREADY"},
		cells: map[string]string{"NAME": nameCell, "CLUSTERGUID": "{{.Spec.ClusterGUID}}", "CLUSTERTYPE": "{{.Spec.ClusterType}}",
			"CALICOVERSION": "{{.Spec.CalicoVersion}}", "DATASTOREREADY": "{{.Spec.DatastoreReady}}"},
	},
	v3.KindFelixConfiguration: {
		names:   []string{"felixconfig", "felixconfigs"},
		headers: []string{"NAME"}, wide: []string{"NAME"}, cells: map[string]string{"NAME": nameCell},
	},
	v3.KindGlobalNetworkPolicy: {
		names:   []string{"gnp", "gnps"},
		headers: []string{"NAME", "TIER"}, wide: []string{"NAME", "TIER", "ORDER", "SELECTOR"}, cells: policyCells,
	},
	v3.KindGlobalNetworkSet: {
		names:   []string{"gnetsets"},
		headers: []string{"NAME"}, wide: []string{"NAME", "NETS"},
		cells: map[string]string{"NAME": nameCell, "NETS": `{{joinAndTruncate .Spec.Nets "," 80}}`},
	},
	v3.KindHostEndpoint: {
		names:   []string{"hep", "heps"},
		headers: []string{"NAME", "NODE"}, wide: []string{"NAME", "NODE", "INTERFACE", "IPS", "PROFILES"},
		cells: map[string]string{"NAME": nameCell, "NODE": "{{.Spec.Node}}", "INTERFACE": "{{.Spec.InterfaceName}}",
			"IPS": `{{join .Spec.ExpectedIPs ","}}`, "PROFILES": `{{join .Spec.Profiles ","}}`},
	},
	v3.KindIPAMConfiguration: {
		names:   []string{"ipamconfig", "ipamconfigs"},
		headers: []string{"NAME", "STRICTAFFINITY", "AUTOALLOCATEBLOCKS"},
		wide:    []string{"NAME", "STRICTAFFINITY", "AUTOALLOCATEBLOCKS", "MAXBLOCKSPERHOST"},
		cells: map[string]string{"NAME": nameCell, "STRICTAFFINITY": "{{.Spec.StrictAffinity}}",
			"AUTOALLOCATEBLOCKS": "{{.Spec.AutoAllocateBlocks}}", "MAXBLOCKSPERHOST": "{{.Spec.MaxBlocksPerHost}}"},
	},
	v3.KindIPPool: {
		names:   []string{"ipp", "ipps", "pool", "pools"},
		headers: []string{"NAME", "CIDR", "SELECTOR"},
		wide:    []string{"NAME", "CIDR", "NAT", "IPIPMODE", "VXLANMODE", "DISABLED", "DISABLEBGPEXPORT", "SELECTOR", "ASSIGNMENTMODE"},
		cells: map[string]string{"NAME": nameCell, "CIDR": "{{.Spec.CIDR}}", "NAT": "{{.Spec.NATOutgoing}}",
			"IPIPMODE":  "{{if .Spec.IPIPMode}}{{.Spec.IPIPMode}}{{else}}Never{{end}}",
			"VXLANMODE": "{{if .Spec.VXLANMode}}{{.Spec.VXLANMode}}{{else}}Never{{end}}",
			"DISABLED":  "{{.Spec.Disabled}}", "DISABLEBGPEXPORT": "{{.Spec.DisableBGPExport}}",
			"SELECTOR": "{{.Spec.NodeSelector}}", "ASSIGNMENTMODE": "{{.Spec.AssignmentMode}}"},
	},
	v3.KindIPReservation: {
		names:   []string{"reservation", "reservations"},
		headers: []string{"NAME"}, wide: []string{"NAME", "CIDRS"},
		cells: map[string]string{"NAME": nameCell, "CIDRS": `{{joinAndTruncate .Spec.ReservedCIDRs "," 80}}`},
	},
	v3.KindKubeControllersConfiguration: {
		names:   []string{"kubecontrollersconfig", "kubecontrollersconfigs"},
		headers: []string{"NAME"}, wide: []string{"NAME"}, cells: map[string]string{"NAME": nameCell},
	},
	v3.KindNetworkPolicy: {
		names:   []string{"policy", "np", "policies", "pol", "pols"},
		headers: []string{"NAME", "TIER"}, wide: []string{"NAME", "TIER", "ORDER", "SELECTOR"}, cells: withNamespace(policyCells),
	},
	v3.KindNetworkSet: {
		names:   []string{"netsets"},
		headers: []string{"NAME"}, wide: []string{"NAME", "NETS"},
		cells: map[string]string{"NAME": nameCell, "NAMESPACE": nsCell, "NETS": `{{joinAndTruncate .Spec.Nets "," 80}}`},
	},
	v3.KindNode: {
		names:   []string{"no", "nos"},
		headers: []string{"NAME"}, wide: []string{"NAME", "ASN", "IPV4", "IPV6"},
		cells: map[string]string{"NAME": nameCell,
			"ASN":  `{{if .Spec.BGP}}{{if .Spec.BGP.ASNumber}}{{.Spec.BGP.ASNumber}}{{else}}({{config "asnumber"}}){{end}}{{end}}`,
			"IPV4": "{{if .Spec.BGP}}{{if .Spec.BGP.IPv4Address}}{{.Spec.BGP.IPv4Address}}{{end}}{{end}}",
			"IPV6": "{{if .Spec.BGP}}{{if .Spec.BGP.IPv6Address}}{{.Spec.BGP.IPv6Address}}{{end}}{{end}}"},
	},
	v3.KindCalicoNodeStatus: {
		names:   []string{"nodestatus", "nodestatuses"},
		headers: []string{"NAME", "NODE"}, wide: []string{"NAME", "NODE", "CLASSES"},
		cells: map[string]string{"NAME": nameCell, "NODE": "{{.Spec.Node}}", "CLASSES": `{{join .Spec.Classes ","}}`},
	},
	v3.KindProfile: {
		names:   []string{"pro", "pros"},
		headers: []string{"NAME"}, wide: []string{"NAME", "LABELS"},
		cells: map[string]string{"NAME": nameCell, "LABELS": `{{join .Spec.LabelsToApply ","}}`},
	},
	v3.KindStagedGlobalNetworkPolicy: {
		names:   []string{"sgnp", "sgnps"},
		headers: []string{"NAME", "TIER"}, wide: []string{"NAME", "TIER", "ORDER", "SELECTOR"}, cells: policyCells,
	},
	v3.KindStagedKubernetesNetworkPolicy: {
		names:   []string{"stagedkubernetespolicy", "sknp", "stagedkubernetespolicies", "skpol", "skpols"},
		headers: []string{"NAME"}, wide: []string{"NAME", "PODSELECTOR"},
		cells: map[string]string{"NAME": nameCell, "NAMESPACE": nsCell, "PODSELECTOR": "{{.Spec.PodSelector}}"},
	},
	v3.KindStagedNetworkPolicy: {
		names:   []string{"stagedpolicy", "snp", "stagedpolicies", "spol", "spols"},
		headers: []string{"NAME", "TIER"}, wide: []string{"NAME", "TIER", "ORDER", "SELECTOR"}, cells: withNamespace(policyCells),
	},
	v3.KindTier: {
		headers: []string{"NAME", "ORDER"}, wide: []string{"NAME", "ORDER"},
		cells: map[string]string{"NAME": nameCell, "ORDER": "{{.Spec.Order}}"},
	},
	v3.KindWorkloadEndpoint: {
		names:   []string{"wep", "weps"},
		headers: []string{"WORKLOAD", "NODE", "NETWORKS", "INTERFACE"},
		wide:    []string{"NAME", "WORKLOAD", "NODE", "NETWORKS", "INTERFACE", "PROFILES", "NATS"},
		cells: map[string]string{"NAME": nameCell, "NAMESPACE": nsCell, "NODE": "{{.Spec.Node}}",
			"ORCHESTRATOR": "{{.Spec.Orchestrator}}",
			"WORKLOAD":     "{{if .Spec.Workload}}{{.Spec.Workload}}{{else}}{{.Spec.Pod}}{{end}}",
			"NETWORKS":     `{{join .Spec.IPNetworks ","}}`, "NATS": `{{join .Spec.IPNATs ","}}`,
			"PROFILES": `{{join .Spec.Profiles ","}}`, "INTERFACE": "{{.Spec.InterfaceName}}"},
	},
}

// tableFor returns a kind's table; kinds calicoctl does not list as a
// table (IPAM internals) show their name only.
func tableFor(kind string) kindTable {
	if t, ok := kindTables[kind]; ok {
		return t
	}
	return kindTable{headers: []string{"NAME"}, wide: []string{"NAME"}, cells: map[string]string{"NAME": nameCell}}
}

// rowTemplate builds the template of one table row for headings, with a
// NAMESPACE column first when asked for and the kind has one.
func (t kindTable) rowTemplate(headings []string, withNS bool) ([]string, string, error) {
	if _, ok := t.cells["NAMESPACE"]; withNS && ok {
		headings = append([]string{"NAMESPACE"}, headings...)
	}
	var b strings.Builder
	for _, h := range headings {
		cell, ok := t.cells[h]
		if !ok {
			valid := make([]string, 0, len(t.cells))
			for k := range t.cells {
				valid = append(valid, k)
			}
			sort.Strings(valid)
			return nil, "", fmt.Errorf("unknown heading %s, valid values are: %s", h, strings.Join(valid, ", "))
		}
		b.WriteString(cell)
		b.WriteByte('\t')
	}
	return headings, b.String(), nil
}

// templateFuncs are the functions Calico's calicoctl offers in table cells
// and in -o go-template.
func templateFuncs(config func(string) string) template.FuncMap {
	return template.FuncMap{"join": join, "joinAndTruncate": joinAndTruncate, "config": config}
}

func join(items any, sep string) string { return joinAndTruncate(items, sep, 0) }

// joinAndTruncate joins a slice's (or a map's key=value, sorted) elements
// with sep, cut to maxLen with "..." when maxLen > 0.
func joinAndTruncate(items any, sep string, maxLen int) string {
	if items == nil {
		return ""
	}
	v := reflect.ValueOf(items)
	var parts []string
	switch v.Kind() {
	case reflect.Map:
		for _, k := range v.MapKeys() {
			parts = append(parts, fmt.Sprintf("%v=%v", k.Interface(), v.MapIndex(k).Interface()))
		}
		sort.Strings(parts)
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			parts = append(parts, fmt.Sprint(v.Index(i).Interface()))
		}
	default:
		parts = []string{fmt.Sprint(items)}
	}
	var buf bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			buf.WriteString(sep)
		}
		buf.WriteString(p)
		if maxLen > 0 && buf.Len() > maxLen {
			buf.Truncate(maxLen - 3)
			buf.WriteString("...")
			break
		}
	}
	return buf.String()
}

// clusterConfig answers {{config "asnumber"}}: the cluster's default AS
// number (BGPConfiguration default, else 64512; "unknown" when it cannot be
// read), looked up once.
func clusterConfig(ctx context.Context, c datastore.Client) func(string) string {
	var as string
	return func(name string) string {
		if strings.ToLower(name) != "asnumber" {
			return "unknown"
		}
		if as == "" {
			as = clusterASNumber(ctx, c)
		}
		return as
	}
}

// clusterASNumber is the AS number nodes use when their Node sets none.
func clusterASNumber(ctx context.Context, c datastore.Client) string {
	if c == nil {
		return "unknown"
	}
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindBGPConfiguration, Name: "default"})
	switch {
	case errors.Is(err, datastore.ErrNotFound):
		return v3.DefaultBGPASNumber.String()
	case err != nil:
		return "unknown"
	}
	if as := r.(*v3.BGPConfiguration).Spec.ASNumber; as != nil {
		return as.String()
	}
	return v3.DefaultBGPASNumber.String()
}
