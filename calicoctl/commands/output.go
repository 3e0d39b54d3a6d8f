package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// printer renders resources in one output format.
type printer struct{ format string }

func newPrinter(format string) (*printer, error) {
	switch format {
	case "ps", "wide", "yaml", "json", "name":
		return &printer{format: format}, nil
	}
	return nil, fmt.Errorf("output format %q is not supported: use ps, wide, yaml, json or name", format)
}

// print writes items. single says the user asked for exactly one object
// (yaml/json then print the object rather than a list); showNS adds a
// NAMESPACE column to tables.
func (p *printer) print(w io.Writer, info v3.KindInfo, items []v3.Resource, single, showNS bool) error {
	switch p.format {
	case "yaml", "json":
		var doc any
		if single {
			js, err := v3.EncodeJSON(items[0])
			if err != nil {
				return err
			}
			doc = json.RawMessage(js)
		} else {
			list := struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Items      []json.RawMessage `json:"items"`
			}{APIVersion: v3.GroupVersion, Kind: info.Kind + "List", Items: []json.RawMessage{}}
			for _, it := range items {
				js, err := v3.EncodeJSON(it)
				if err != nil {
					return err
				}
				list.Items = append(list.Items, js)
			}
			doc = list
		}
		js, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if p.format == "json" {
			_, err = fmt.Fprintf(w, "%s\n", js)
			return err
		}
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	case "name":
		for _, it := range items {
			fmt.Fprintln(w, it.GetName())
		}
		return nil
	}
	cols := columnsFor(info.Kind, p.format == "wide")
	if showNS {
		cols = append([]column{{"NAMESPACE", func(r v3.Resource) string { return r.GetNamespace() }}}, cols...)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for _, it := range items {
		vals := make([]string, len(cols))
		for i, c := range cols {
			vals[i] = c.value(it)
		}
		fmt.Fprintln(tw, strings.Join(vals, "\t"))
	}
	return tw.Flush()
}

type column struct {
	header string
	value  func(v3.Resource) string
}

var nameCol = column{"NAME", func(r v3.Resource) string { return r.GetName() }}

func order(o *float64) string {
	if o == nil {
		return ""
	}
	return strconv.FormatFloat(*o, 'f', -1, 64)
}

// columnsFor returns Calico's table columns for a kind (NAME only for
// kinds without a richer table).
func columnsFor(kind string, wide bool) []column {
	switch kind {
	case v3.KindIPPool:
		c := []column{nameCol,
			{"CIDR", func(r v3.Resource) string { return r.(*v3.IPPool).Spec.CIDR }}}
		if wide {
			c = append(c,
				column{"NAT", func(r v3.Resource) string { return strconv.FormatBool(r.(*v3.IPPool).Spec.NATOutgoing) }},
				column{"IPIPMODE", func(r v3.Resource) string { return string(r.(*v3.IPPool).Spec.IPIPMode) }},
				column{"VXLANMODE", func(r v3.Resource) string { return string(r.(*v3.IPPool).Spec.VXLANMode) }},
				column{"DISABLED", func(r v3.Resource) string { return strconv.FormatBool(r.(*v3.IPPool).Spec.Disabled) }},
				column{"DISABLEBGPEXPORT", func(r v3.Resource) string {
					return strconv.FormatBool(r.(*v3.IPPool).Spec.DisableBGPExport)
				}})
		}
		return append(c, column{"SELECTOR", func(r v3.Resource) string { return r.(*v3.IPPool).Spec.NodeSelector }})
	case v3.KindBGPPeer:
		return []column{nameCol,
			{"PEERIP", func(r v3.Resource) string { return r.(*v3.BGPPeer).Spec.PeerIP }},
			{"NODE", func(r v3.Resource) string {
				s := r.(*v3.BGPPeer).Spec
				if s.Node == "" && s.NodeSelector == "" {
					return "(global)"
				}
				if s.Node != "" {
					return s.Node
				}
				return s.NodeSelector
			}},
			{"ASN", func(r v3.Resource) string { return r.(*v3.BGPPeer).Spec.ASNumber.String() }}}
	case v3.KindNode:
		c := []column{nameCol}
		if wide {
			bgp := func(r v3.Resource) *v3.NodeBGPSpec { return r.(*v3.Node).Spec.BGP }
			c = append(c,
				column{"ASN", func(r v3.Resource) string {
					if b := bgp(r); b != nil && b.ASNumber != nil {
						return b.ASNumber.String()
					}
					return "(64512)"
				}},
				column{"IPV4", func(r v3.Resource) string {
					if b := bgp(r); b != nil {
						return b.IPv4Address
					}
					return ""
				}},
				column{"IPV6", func(r v3.Resource) string {
					if b := bgp(r); b != nil {
						return b.IPv6Address
					}
					return ""
				}})
		}
		return c
	case v3.KindWorkloadEndpoint:
		return []column{
			{"WORKLOAD", func(r v3.Resource) string { return r.(*v3.WorkloadEndpoint).Spec.Workload }},
			{"NODE", func(r v3.Resource) string { return r.(*v3.WorkloadEndpoint).Spec.Node }},
			{"NETWORKS", func(r v3.Resource) string { return strings.Join(r.(*v3.WorkloadEndpoint).Spec.IPNetworks, ",") }},
			{"INTERFACE", func(r v3.Resource) string { return r.(*v3.WorkloadEndpoint).Spec.InterfaceName }}}
	case v3.KindHostEndpoint:
		return []column{nameCol,
			{"NODE", func(r v3.Resource) string { return r.(*v3.HostEndpoint).Spec.Node }},
			{"INTERFACE", func(r v3.Resource) string { return r.(*v3.HostEndpoint).Spec.InterfaceName }},
			{"IPS", func(r v3.Resource) string { return strings.Join(r.(*v3.HostEndpoint).Spec.ExpectedIPs, ",") }}}
	case v3.KindTier:
		return []column{nameCol, {"ORDER", func(r v3.Resource) string { return order(r.(*v3.Tier).Spec.Order) }}}
	case v3.KindNetworkPolicy:
		c := []column{nameCol}
		if wide {
			c = append(c,
				column{"TIER", func(r v3.Resource) string { return r.(*v3.NetworkPolicy).Spec.Tier }},
				column{"ORDER", func(r v3.Resource) string { return order(r.(*v3.NetworkPolicy).Spec.Order) }},
				column{"SELECTOR", func(r v3.Resource) string { return r.(*v3.NetworkPolicy).Spec.Selector }})
		}
		return c
	case v3.KindGlobalNetworkPolicy:
		c := []column{nameCol}
		if wide {
			c = append(c,
				column{"TIER", func(r v3.Resource) string { return r.(*v3.GlobalNetworkPolicy).Spec.Tier }},
				column{"ORDER", func(r v3.Resource) string { return order(r.(*v3.GlobalNetworkPolicy).Spec.Order) }},
				column{"SELECTOR", func(r v3.Resource) string { return r.(*v3.GlobalNetworkPolicy).Spec.Selector }})
		}
		return c
	case v3.KindStagedNetworkPolicy:
		spec := func(r v3.Resource) *v3.StagedNetworkPolicySpec { return &r.(*v3.StagedNetworkPolicy).Spec }
		c := []column{nameCol, {"TIER", func(r v3.Resource) string { return spec(r).Tier }}}
		if wide {
			c = append(c,
				column{"ORDER", func(r v3.Resource) string { return order(spec(r).Order) }},
				column{"SELECTOR", func(r v3.Resource) string { return spec(r).Selector }})
		}
		return c
	case v3.KindStagedGlobalNetworkPolicy:
		spec := func(r v3.Resource) *v3.StagedGlobalNetworkPolicySpec { return &r.(*v3.StagedGlobalNetworkPolicy).Spec }
		c := []column{nameCol, {"TIER", func(r v3.Resource) string { return spec(r).Tier }}}
		if wide {
			c = append(c,
				column{"ORDER", func(r v3.Resource) string { return order(spec(r).Order) }},
				column{"SELECTOR", func(r v3.Resource) string { return spec(r).Selector }})
		}
		return c
	case v3.KindStagedKubernetesNetworkPolicy:
		c := []column{nameCol}
		if wide {
			c = append(c, column{"PODSELECTOR", func(r v3.Resource) string {
				return r.(*v3.StagedKubernetesNetworkPolicy).Spec.PodSelector.String()
			}})
		}
		return c
	case v3.KindNetworkSet:
		c := []column{nameCol}
		if wide {
			c = append(c, column{"NETS", func(r v3.Resource) string { return strings.Join(r.(*v3.NetworkSet).Spec.Nets, ",") }})
		}
		return c
	case v3.KindGlobalNetworkSet:
		c := []column{nameCol}
		if wide {
			c = append(c, column{"NETS", func(r v3.Resource) string { return strings.Join(r.(*v3.GlobalNetworkSet).Spec.Nets, ",") }})
		}
		return c
	}
	return []column{nameCol}
}
