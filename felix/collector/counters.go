package collector

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/felix/rules"
)

// RuleCounters are the per-rule Prometheus counters: the packets, bytes
// and connections whose path went through each verdict (a policy's or
// profile's rule, a tier's end, the end of the profiles), by tier,
// policy, namespace, direction (ingress/egress), rule index and action.
// They are counted from the NFLOG stream and conntrack (see the package
// comment), so a scrape reads memory only. A denied packet counts at each
// verdict of its path; an allowed connection counts once at its first
// packet (connections) and then with conntrack's packets and bytes.
type RuleCounters struct {
	packets, bytes, conns *prometheus.CounterVec
}

var ruleLabels = []string{"tier", "policy", "namespace", "direction", "rule_index", "action"}

// NewRuleCounters registers the counters with reg.
func NewRuleCounters(reg prometheus.Registerer) *RuleCounters {
	c := &RuleCounters{
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_policy_rule_packets_total",
			Help: "Packets through each policy rule's verdict (from flow logs: NFLOG and conntrack)."}, ruleLabels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_policy_rule_bytes_total",
			Help: "Bytes through each policy rule's verdict (from flow logs: NFLOG and conntrack)."}, ruleLabels),
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_policy_rule_connections_total",
			Help: "Connections allowed (first packets) by each policy rule's verdict."}, ruleLabels),
	}
	if reg != nil {
		reg.MustRegister(c.packets, c.bytes, c.conns)
	}
	return c
}

func (c *RuleCounters) add(hits []PolicyHit, ingress bool, packets, bytes uint64, conns int) {
	if c == nil {
		return
	}
	dir := "egress"
	if ingress {
		dir = "ingress"
	}
	for _, h := range hits {
		name := h.Name
		switch h.Kind {
		case "knp":
			name = "knp.default." + name
		case "kcnp":
			name = rules.ClusterPolicyPrefix + name
		}
		l := prometheus.Labels{"tier": h.Tier, "policy": name, "namespace": h.Namespace, "direction": dir,
			"rule_index": strconv.Itoa(h.RuleIndex), "action": h.Action}
		if packets > 0 {
			c.packets.With(l).Add(float64(packets))
		}
		if bytes > 0 {
			c.bytes.With(l).Add(float64(bytes))
		}
		if conns > 0 {
			c.conns.With(l).Add(float64(conns))
		}
	}
}
