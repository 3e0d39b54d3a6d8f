package render

import (
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// SecretRef names one key of a Kubernetes Secret, as a BGPPassword's
// secretKeyRef does.
type SecretRef struct {
	Name string
	Key  string
}

// Input is everything the renderer reads. The slices hold the whole
// cluster's resources (the renderer picks what concerns NodeName); their
// order does not matter.
type Input struct {
	// NodeName is the node this configuration is for.
	NodeName string

	BGPConfigurations []v3.BGPConfiguration // "default" and "node.<name>"
	Nodes             []v3.Node
	Peers             []v3.BGPPeer
	Filters           []v3.BGPFilter
	Pools             []v3.IPPool
	Affinities        []v3.BlockAffinity
	Blocks            []v3.IPAMBlock

	// Secrets holds resolved BGP passwords. A password whose secret is
	// missing is an error: BIRD would otherwise run the session without
	// authentication.
	Secrets map[SecretRef]string

	// RouterID mirrors calico/node's CALICO_ROUTER_ID: "" uses the node's
	// IPv4 address (or a hash of its name on IPv6-only nodes), "hash" always
	// hashes the name, anything else must be an IPv4 address.
	RouterID string

	// LogFile, when set, makes BIRD log there; "" logs to stderr (never to
	// syslog, see header in write.go).
	LogFile string
}

// FromResources sorts decoded resources into an Input. Kinds the renderer
// does not read are ignored.
func FromResources(nodeName string, rs []v3.Resource) (Input, error) {
	in := Input{NodeName: nodeName}
	for _, r := range rs {
		switch o := r.(type) {
		case *v3.BGPConfiguration:
			in.BGPConfigurations = append(in.BGPConfigurations, *o)
		case *v3.Node:
			in.Nodes = append(in.Nodes, *o)
		case *v3.BGPPeer:
			in.Peers = append(in.Peers, *o)
		case *v3.BGPFilter:
			in.Filters = append(in.Filters, *o)
		case *v3.IPPool:
			in.Pools = append(in.Pools, *o)
		case *v3.BlockAffinity:
			in.Affinities = append(in.Affinities, *o)
		case *v3.IPAMBlock:
			in.Blocks = append(in.Blocks, *o)
		case nil:
			return Input{}, fmt.Errorf("nil resource")
		}
	}
	return in, nil
}
